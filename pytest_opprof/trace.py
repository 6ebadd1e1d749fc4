"""The file source: Kineto / Chrome trace JSON (.json or .json.gz) -> events.

Reads what torch.profiler's export_chrome_trace and tensorboard_trace_handler write: old Kineto
(integer microseconds) and new (microseconds with nanosecond decimals), NVIDIA and AMD ROCm.
Timestamps are parsed from their decimal text, never through float64: 1.7e15 us has a float
resolution of 0.25 us, and we promise nanoseconds.
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import math
import os
import re
import zlib
from dataclasses import dataclass, field, replace
from decimal import Decimal
from itertools import compress, repeat
from operator import add, eq, is_not, itemgetter, methodcaller
from pathlib import Path
from typing import Any

from .analysis import MAX_THREADS, OpWork, Profile, analyze
from .analysis.checks import contention_check, last_step_partial, overhead_check, with_other_threads
from .analysis.model import OtherThread, WorkloadReference, workload_problem
from .errors import (
    OUTPUT_FIX,
    OUTPUT_SOURCE,
    RUN_REPORT,
    TraceError,
    bad_end_thread,
    bad_trace,
    digits_past_limit,
    gzip_bomb,
    lfs_trace,
    no_category_read,
    not_a_path,
    opprof_output,
    shown_value,
    trace_not_found,
)
from .events import (
    CPU_OP,
    DEVICE_KINDS,
    END_THREAD,
    KIND_OF_CATEGORY,
    MEMORY_KINDS,
    NEVER_ENDED,
    NO_DEVICE,
    OTHER,
    PYTHON,
    RUNTIME,
    Event,
    EventTable,
    capped_lists,
    freeze,
    gc_paused,
    printable_names,
)
from .files import NotReadable, lfs_pointer, read_regular


@dataclass(frozen=True, slots=True)
class TraceFile:
    """The events of one trace file and the facts its header gives."""

    path: str
    table: EventTable
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def events(self) -> list[Event]:
        return self.table.to_events()


def us_text_to_ns(value: object) -> int:
    """Microseconds as JSON gives them (int, or the text of a decimal) -> integer nanoseconds,
    within the int64 nanoseconds torch's profiler keeps (|ns| < 2**63: beyond them no clock)."""
    if type(value) is int:
        ns = value * 1000
    elif (
        type(value) is str and len(value) <= _MAX_NUMBER_TEXT and _DECIMAL.fullmatch(value)
    ):  # no `1_000`, ` 12 `, `١٢`: what float() lets by
        ns = _decimal_text_to_ns(value)
    elif isinstance(value, float) and math.isfinite(value):  # only when a caller parsed floats itself
        ns = round(value * 1000)
    else:
        raise ValueError(f"{shown_value(value)} is not a number of microseconds")
    if not -_INT64 < ns < _INT64:
        raise ValueError(f"{shown_value(value)} microseconds is beyond any clock (over 2**63 ns)")
    return ns


def _decimal_text_to_ns(text: str) -> int:
    dot = text.find(".")
    if dot >= 0 and "e" not in text and "E" not in text:
        frac = text[dot + 1 :]
        if len(frac) <= 3:
            return int(text[:dot] + frac + "000"[len(frac) :])
    # Sub-nanosecond digits or an exponent: exact decimal, rounded half-even; the exponent is
    # bounded first (1e999990 would take half a minute to expand).
    number = Decimal(text)
    if number.adjusted() > _MAX_EXPONENT:
        return _INT64  # beyond any clock
    if number.adjusted() < -_MAX_EXPONENT:
        return 0  # far below a nanosecond
    return int((number * 1000).to_integral_value())


_MAX_NUMBER_TEXT = 64  # characters: a timestamp has ~20
_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]{1,12})?")  # a JSON number's grammar, ASCII digits
_MAX_EXPONENT = 20  # past 2**63 ns either way: no need to expand such a decimal
_INT64 = 2**63  # Kineto writes times in int64 ns, ids and byte counts as int64: larger is not from a profiler


MAX_TRACE_BYTES = 4 << 30  # a trace (after gzip) larger than this is refused, not read into memory


def _read_bytes(path: Path) -> bytes | bytearray:
    try:
        data: bytes | bytearray = read_regular(path, MAX_TRACE_BYTES)
    except NotReadable as exc:
        raise TraceError(bad_trace(path, str(exc))) from None
    except FileNotFoundError:
        raise TraceError(trace_not_found(path)) from None
    except IsADirectoryError:
        raise TraceError(
            f"{path}: a folder, not a trace file; give one .json or .json.gz trace (opprof compare takes two folders of baselines)"
        ) from None
    except OSError as exc:
        raise TraceError(bad_trace(path, f"cannot be read ({exc.strerror})")) from None
    if not data or data.isspace():  # no copy, as strip() makes of a large bytearray
        raise TraceError(bad_trace(path, "empty file"))
    if lfs_pointer(data):  # not `not valid JSON`, nor `corrupt gzip`, and not to export again
        raise TraceError(lfs_trace(path))
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(path, data)
        if not data or data.isspace():
            raise TraceError(bad_trace(path, "empty file (inside the gzip)"))
    return data


def _gunzip(path: Path, data: bytes | bytearray) -> bytearray:
    """Decompressed in chunks, never beyond MAX_TRACE_BYTES nor, past BOMB_FLOOR, beyond
    MAX_GZIP_RATIO times the file (a small gzip of blanks or of `{},` repeated can be huge: a
    4.6 MB file of 1 GiB of spaces took 2.1 GB to read), and refused at the first chunk that
    cannot be JSON text: a bomb of zeros costs one chunk. One buffer: no second copy to join."""
    text = bytearray()
    most = min(MAX_TRACE_BYTES, max(BOMB_FLOOR, MAX_GZIP_RATIO * len(data)))
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            while chunk := f.read(_GUNZIP_CHUNK):
                _check_json_text(path, chunk, first=not text)
                text += chunk
                if len(text) > most:
                    raise TraceError(bad_trace(path, _too_large(most, len(data))))
    except (EOFError, OSError, zlib.error):
        raise TraceError(bad_trace(path, "truncated or corrupt gzip data")) from None
    return text


def _too_large(most: int, size: int) -> str:
    if most == MAX_TRACE_BYTES:
        return f"decompresses to more than {MAX_TRACE_BYTES:,} bytes"
    return gzip_bomb(MAX_GZIP_RATIO, size)


_GUNZIP_CHUNK = 8 << 20
BOMB_FLOOR = 64 << 20  # a gzip decompressing to less is read whatever its ratio
MAX_GZIP_RATIO = 100  # traces compress 7-25x (the shared A100/MI250/CPU traces, a 14 MB CPU capture)


def _check_json_text(path: Path, chunk: bytes, first: bool) -> None:
    """JSON text holds no NUL byte and a trace opens with `{` or `[`."""
    opening = (chunk.removeprefix(codecs.BOM_UTF8) if first else chunk).lstrip()[:1]  # json.loads takes a BOM
    if b"\0" in chunk or (first and opening not in (b"{", b"[", b"")):
        raise TraceError(bad_trace(path, "not a JSON trace inside the gzip"))


class _Ids:
    """The ids of a trace's pids, tids, devices and streams. A number is itself, as is its text
    (`"1"`, and `1.0`, which the reader keeps as text: thread 1); a fraction (`1.5`) is no id; a name
    (`"stream 7"`, `"Spans"`) gets a stable negative id that no number of the trace is (a name's -2
    had merged with a thread numbered -2)."""

    def __init__(self, columns: tuple[list[Any], ...], args: list[Any]) -> None:
        self._columns, self._args = columns, args
        self._names: dict[str, int] = {}
        self._numbers: set[int] | None = None  # the trace's numeric ids, read at its first name
        self._next = -2  # -1 is a host event's device (NO_DEVICE)

    def __call__(self, value: object) -> int:
        if isinstance(value, str) and value in self._names:  # a name met before: no parse again
            return self._names[value]
        number = _number_id(value)
        if number is not None:
            return number
        if not isinstance(value, str):
            raise ValueError(f"{shown_value(value)} is not a number or a name")
        if value not in self._names:
            numbers = self._numbers = self._numbers if self._numbers is not None else self._numeric_ids()
            while self._next in numbers:
                self._next -= 1
            self._names[value] = self._next
            self._next -= 1
        return self._names[value]

    def _numeric_ids(self) -> set[int]:
        values = [v for column in self._columns for v in column]
        values += [a.get(key) for a in self._args if a is not None for key in ("device", "stream")]
        return {n for n in map(_number_id_or_none, values) if n is not None}


_FRACTION_ID = re.compile(r"-?\d+(\.\d*)?([eE][-+]?\d+)?")


def _number_id(value: object) -> int | None:
    """An id written as a number: an int, its text, or a number the reader kept as text (`1.0`,
    `1e3`) that is whole; None for a name. A fraction is no id (ValueError)."""
    if type(value) is int:
        return value
    if not isinstance(value, str) or not value.isascii() or len(value) > 64:
        return None
    if value.lstrip("-").isdigit():
        return int(value) if len(value) < 20 else None
    if _FRACTION_ID.fullmatch(value) is None:
        return None
    number = Decimal(value)
    if number != number.to_integral_value() or abs(number) >= _INT64:
        raise ValueError(f"{value} is not a whole number below 2**63 nor a name")
    return int(number)


def _number_id_or_none(value: object) -> int | None:
    try:
        return _number_id(value)
    except ValueError:
        return None


_MISSING = object()


def _whole(value: object) -> int | None:
    """An int in [0, 2**63), or the ASCII digits of one ("2560", as ROCm writes a size); else None."""
    if type(value) is int:
        return value if 0 <= value < _INT64 else None
    if type(value) is str and value.isascii() and value.isdigit() and len(value) < 20 and int(value) < _INT64:
        return int(value)
    return None


_NO_ARGS: dict[str, Any] = {}
_FOURTH_LAST = itemgetter(-4)
_FIFTH_LAST = itemgetter(-5)  # a digit before the dot: `.123` is no JSON number
_DROP_DOT = methodcaller("replace", ".", "", 1)


def _check_ends(starts: list[int], durs: list[int], names: list[str], source: str) -> None:
    """Each event ends within the int64 nanoseconds too (`ts` 9.2e15 us and `dur` 9e13, each
    within them, made a 25-hour step): the sum is scanned only where the largest of each could
    pass them."""
    if not starts or max(starts) + max(durs) < _INT64:
        return
    i = next(i for i, end in enumerate(map(add, starts, durs)) if end >= _INT64)
    reason = "its 'ts' + 'dur' ends beyond any clock (over 2**63 ns)"
    raise TraceError(bad_trace(source, f"complete event {i} ({shown_value(names[i])}): {reason}"))


def _plain_digits(text: str) -> bool:
    """No character int() reads that a JSON number never holds (`_`, spaces, `+`, other scripts'
    digits): a fast guard for the column's fast path (about 6% of it), which us_text_to_ns's
    full check would double."""
    return text.isascii() and not any(c in text for c in "_+ \t\n\r\f\v")


def _ns_column(values: list[Any], names: list[Any], what: str, source: str) -> list[int]:
    """Microsecond values -> ns, exactly.

    Fast path, at C speed, when every value is Kineto's "1234.567" text (3 decimals): dropping
    the dot gives the nanoseconds. Anything else (ints, other decimals, exponents) goes through
    us_text_to_ns, which also names a bad value."""
    try:
        dots = all(map(eq, map(_FOURTH_LAST, values), repeat(".")))
        if dots and all(map(str.isdigit, map(_FIFTH_LAST, values))) and _plain_digits("".join(values)):
            ns = list(map(int, map(_DROP_DOT, values)))
            if not ns or -_INT64 < min(ns) <= max(ns) < _INT64:
                return ns
    except (TypeError, LookupError, ValueError):
        pass  # an int, a short text, an exponent, an object: the general path below names it
    out = []
    for i, v in enumerate(values):
        try:
            out.append(us_text_to_ns(v))
        except ValueError as exc:
            reason = f"no {what!r}" if v is _MISSING else f"{what!r} {exc}"  # `'ts' 'abc' is not ...`
            raise TraceError(bad_trace(source, f"complete event {i} ({shown_value(names[i])}): {reason}")) from None
    return out


SESSION_SPAN = "Trace"  # Kineto's own span of the profiling session ("PyTorch Profiler (0)"), no event of the code


def _parse(path: Path, data: bytes | bytearray) -> tuple[Any, list[tuple[Any, ...]], int, int]:
    """Parse the JSON, taking each complete ("ph": "X") event out as a row on the way; the counts
    are of the complete events, Kineto's session spans left out, and of those spans.

    The object hook sees each event while it is fresh in cache and keeps a tuple instead of
    the dict: as fast as a bare json.loads, and no second pass over 10^5 dicts afterwards.
    parse_float=str keeps "1695835542514261.125" exact for us_text_to_ns. strict=False reads a
    raw control character inside a string, as torch 2.6's Kineto writes a record_function name's
    tab or ESC (a compat run: every such capture was "not valid JSON"); such a name is then
    written with its escapes, as any is.
    """
    rows: list[tuple[Any, ...]] = []
    skipped: list[int] = []
    bad_args: list[int] = []
    odd: list[tuple[str, Any]] = []  # a phase or category that is no text (a trial's were dropped in silence)
    keep, skip = rows.append, skipped.append

    def take_event(d: dict[str, Any], kinds: dict[str, str] = KIND_OF_CATEGORY) -> Any:
        if d.get("ph") != "X":
            return d
        cat = d.get("cat")
        kind = kinds.get(cat, OTHER) if type(cat) is str else OTHER
        if kind is OTHER or kind is PYTHON:
            if cat is not None and type(cat) is not str:
                odd.append(("cat", d))
            skip(cat == SESSION_SPAN)
            return None
        args = d.get("args")
        if type(args) is not dict:
            if args is not None:
                bad_args.append(len(rows))
            args = _NO_ARGS
        keep(
            (
                kind,
                d.get("name", _MISSING),
                d.get("ts", _MISSING),
                d.get("dur", _MISSING),
                d.get("pid", 0),
                d.get("tid", 0),
                args.get("correlation", 0),
                args.get("External id", 0),
                # the args the table reads: a device event's; an op's recorded inputs; a runtime
                # copy's size (ROCm's device copies carry no bytes; the launching call has them)
                args
                if kind in DEVICE_KINDS
                or (kind is CPU_OP and ("Input Dims" in args or END_THREAD in args))
                or (kind is RUNTIME and "size" in args)
                else None,
            )
        )
        return None

    try:
        doc = json.loads(data, parse_float=str, object_hook=take_event, strict=False)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise TraceError(bad_trace(path, _unparsed(data, exc))) from None
    _refuse_misplaced(path, doc, rows, len(skipped), odd, bad_args)
    spans = sum(skipped)
    return doc, rows, len(rows) + len(skipped) - spans, spans


def _refuse_misplaced(
    path: Path, doc: Any, rows: list[tuple[Any, ...]], skipped: int, odd: list[tuple[str, Any]], bad_args: list[int]
) -> None:
    """After the parse: one line for complete events taken from outside the event list, a phase or
    category that is no text, or an event whose 'args' is not an object."""
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if isinstance(events, list):  # the events kept are those of another phase: a few, after the parse
        odd = odd + [("ph", e) for e in events if type(e) is dict and type(e.get("ph", "")) is not str][:1]
        # each taken event left a None in its list; more taken than left: some came from elsewhere (a
        # list's own nulls could hide a few, and no Kineto trace nests an event in another's args)
        if len(rows) + skipped > events.count(None):
            raise TraceError(bad_trace(path, ELSEWHERE))
    if odd:
        key, event = odd[0]
        where = f"an event ({shown_value(event.get('name'))})"
        raise TraceError(bad_trace(path, f"{where}: {key!r} is {shown_value(event[key])}, not a text"))
    if bad_args:
        i = bad_args[0]
        raise TraceError(bad_trace(path, f"complete event {i} ({shown_value(rows[i][1])}): 'args' is not an object"))


ELSEWHERE = (
    "complete events lie outside its 'traceEvents' list ('traceEvents' given twice, or events in the metadata): "
    "a hand-edited or merged file"
)


def _unparsed(data: bytes | bytearray, exc: ValueError | RecursionError) -> str:
    """Why json.loads could not read the text, in a trace's terms."""
    if isinstance(exc, UnicodeDecodeError):
        return "not text (neither JSON nor gzip-compressed JSON)"
    if isinstance(exc, RecursionError):
        return "nested too deeply to be a profiler trace"
    if isinstance(exc, json.JSONDecodeError):
        # a string still open at the end is truncated too (a raw newline inside one is refused
        # as an "Invalid control character", so only the end of the text leaves one open)
        if exc.pos >= len(data.rstrip()) - 1 or exc.msg.startswith("Unterminated string"):
            return f"truncated JSON (ends at line {exc.lineno})"
        return f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
    return digits_past_limit(exc)  # an integer of thousands of digits


def _table_from_rows(rows: list[tuple[Any, ...]], source: str) -> EventTable:
    if not rows:
        return EventTable.from_events([])
    kinds, names, ts, dur, pids, tids, corrs, exts, kept_args = map(list, zip(*rows))
    if not set(map(type, names)) <= {str}:
        i = next(i for i, n in enumerate(names) if type(n) is not str)
        what = "no 'name'" if names[i] is _MISSING else f"'name' is {shown_value(names[i])}, not a text"
        raise TraceError(bad_trace(source, f"complete event {i}: {what}"))
    names = printable_names(names)  # a name holding a newline or an ESC would forge a table row
    starts = _ns_column(ts, names, "ts", source)
    durs = _ns_column(dur, names, "dur", source)
    _check_ends(starts, durs, names, source)
    ids = _Ids((pids, tids), kept_args)
    for column, what in ((pids, "pid"), (tids, "tid")):
        if not set(map(type, column)) <= {int}:
            try:
                column[:] = [v if type(v) is int else ids(v) for v in column]
            except ValueError as exc:
                raise TraceError(bad_trace(source, f"a complete event's '{what}': {exc}")) from None
    for column, what in ((corrs, "correlation"), (exts, "External id")):
        if not set(map(type, column)) <= {int}:
            column[:] = [
                v if type(v) is int else _whole_number(v, i, names, what, source) for i, v in enumerate(column)
            ]
    columns = _ArgColumns(len(rows))
    for i in compress(range(len(rows)), map(is_not, kept_args, repeat(None))):
        columns.take(i, kinds[i], kept_args[i], pids[i], tids[i], corrs[i], names, ids, source)
    columns.fill_bytes_from_launches(corrs)
    columns.check_end_threads(kinds, pids, tids, names, source)
    table = EventTable(
        kinds, names, starts, durs, pids, tids, columns.devices, columns.streams, corrs, exts, columns.nbytes,
        columns.shapes, columns.dtypes, columns.flops,
    )  # fmt: skip
    table.end_threads = columns.end_threads
    if table.has_shapes:  # the inputs' trace args say where autograd recorded an op
        table.autograd = columns.autograd
    return table


SEQUENCE = "Sequence number"  # an op's arg where autograd recorded it (grad mode on as it ran)


def _whole_number(value: Any, i: int, names: list[Any], what: str, source: str) -> int:
    """A correlation, External id or byte count: an int >= 0, or the text of one ("2560", as ROCm
    writes a copy's size); anything else names the event and the field."""
    whole = _whole(value)
    if whole is not None:
        return whole
    raise TraceError(
        bad_trace(
            source,
            f"complete event {i} ({shown_value(names[i])}): {what!r} is {shown_value(value)}, not a whole number below 2**63",
        )
    )


class _ArgColumns:
    """The columns read from events' args: device and stream, bytes, recorded inputs."""

    def __init__(self, n: int) -> None:
        self.devices = [NO_DEVICE] * n
        self.streams = [NO_DEVICE] * n
        self.nbytes = [0] * n
        self.shapes: list[Any] = [()] * n
        self.dtypes: list[Any] = [()] * n
        self.flops = [0] * n
        self.launch_size: dict[int, int] = {}  # correlation -> the size a runtime copy call gave
        self.sizeless: list[int] = []  # device copies without bytes of their own
        self.end_threads: dict[int, int] = {}  # ops whose end another thread recorded (opprof's traces say)
        self.autograd: set[int] = set()  # ops autograd recorded (their SEQUENCE)

    def take(
        self, i: int, kind: str, a: dict[str, Any], pid: Any, tid: Any, corr: int, names: list[Any],
        ids: _Ids, source: str,
    ) -> None:  # fmt: skip
        if kind is CPU_OP:
            self.shapes[i], self.dtypes[i], self.flops[i] = _inputs(a)
            self._end_thread(i, a, tid, names, source)
            sequence = a.get(SEQUENCE, -1)  # torch writes it where autograd recorded the op (read with its inputs)
            if type(sequence) is int and sequence >= 0:
                self.autograd.add(i)
            return
        if kind is RUNTIME:  # a size that is not a whole number is not one we need: left out
            size = _whole(a["size"])
            if size is not None:
                self.launch_size[corr] = size
            return
        device, stream = a.get("device", pid), a.get("stream", tid)
        try:
            self.devices[i] = device if type(device) is int else ids(device)
            self.streams[i] = stream if type(stream) is int else ids(stream)
        except ValueError as exc:
            raise TraceError(
                bad_trace(source, f"complete event {i} ({shown_value(names[i])}): device or stream {exc}")
            ) from None
        size = a.get("bytes", _MISSING)
        if size is _MISSING:
            if kind in MEMORY_KINDS:
                self.sizeless.append(i)
        else:
            self.nbytes[i] = (
                size if type(size) is int and 0 <= size < _INT64 else _whole_number(size, i, names, "bytes", source)
            )

    def _end_thread(self, i: int, a: dict[str, Any], tid: int, names: list[Any], source: str) -> None:
        end = a.get(END_THREAD, tid)
        if type(end) is not int:
            raise TraceError(bad_end_thread(source, i, shown_value(names[i]), shown_value(end), "not a thread id"))
        if end != tid:
            self.end_threads[i] = end

    def check_end_threads(
        self, kinds: list[str], pids: list[int], tids: list[int], names: list[Any], source: str
    ) -> None:
        """Each `End thread` must name a thread of the op's process that holds CPU events: taken on
        trust, it would exempt a corrupt duration from every nesting check (a review's 50 ms op
        in a 0.1 ms step, `End thread` 999, read as trusted)."""
        if not self.end_threads:
            return
        host = {(pid, tid) for kind, pid, tid in zip(kinds, pids, tids) if kind not in DEVICE_KINDS}
        for i, end in self.end_threads.items():
            if (pids[i], end) not in host and end != NEVER_ENDED:
                why = "a thread with no event in this trace"
                raise TraceError(bad_end_thread(source, i, shown_value(names[i]), str(end), why))

    def fill_bytes_from_launches(self, corrs: list[int]) -> None:
        """A copy or memset without bytes (ROCm's) takes the size of the runtime call that
        launched it; a kernel has none, and an unmatched copy stays at 0."""
        for i in self.sizeless:
            self.nbytes[i] = self.launch_size.get(corrs[i], 0) if corrs[i] else 0


def _inputs(args: dict[str, Any]) -> tuple[Any, tuple[str, ...], int]:
    """An op's input shapes, input types and FLOPs from its trace args ("Input Dims", ...).
    Inputs that are not a list of shapes with a list of type names are taken as not recorded."""
    dims, types, flops = args.get("Input Dims"), args.get("Input type"), args.get("flops", 0)
    if not (isinstance(dims, list) and all(map(_is_shape, dims))):
        return (), (), 0
    if not (isinstance(types, list) and all(isinstance(t, str) for t in types)):
        return (), (), 0
    dtypes = tuple(types)
    return capped_lists(freeze(dims), dtypes), dtypes, flops if type(flops) is int and 0 < flops < 1 << 100 else 0


def _is_shape(value: Any) -> bool:
    """A list of integers, or of shapes (the inputs of a list of tensors)."""
    return isinstance(value, list) and all(type(d) is int or _is_shape(d) for d in value)


def _not_a_trace(path: Path, doc: Any) -> str:
    """Why a JSON document is not a trace: an opprof baseline or run report says so and what reads it."""
    output = opprof_output(doc)
    if isinstance(doc, dict) and "schema" in doc and "ops" in doc and not output:
        return f"{path}: an opprof baseline, not a trace; opprof show reads baselines"
    if output == RUN_REPORT:
        return f"{path}: {RUN_REPORT}, not a trace; opprof analyze reads the traces --opprof-trace-dir writes"
    if output:
        return f"{path}: {output}, not a trace; {OUTPUT_FIX}: {OUTPUT_SOURCE[output]}"
    return bad_trace(path, "not a Kineto/Chrome trace (no 'traceEvents')")


def read_trace(path: str | os.PathLike[str]) -> TraceFile:
    """Read a Kineto/Chrome trace (.json or .json.gz; gzip is detected from the content).

    Raises TraceError with a one-line reason naming the file when it cannot be read.
    """
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise TraceError(not_a_path("load_trace()", path))
    p = Path(path)
    doc, rows, n_complete, spans = _parse(p, _read_bytes(p))
    if isinstance(doc, list):
        metadata: dict[str, Any] = {}
    elif isinstance(doc, dict) and "traceEvents" in doc:
        metadata = {k: v for k, v in doc.items() if k != "traceEvents"}
        if not isinstance(doc["traceEvents"], list):
            raise TraceError(bad_trace(p, "'traceEvents' is not a list"))
    else:
        raise TraceError(_not_a_trace(p, doc))
    if not n_complete and spans:  # torch's trace of a profiler that recorded nothing (torch 2.11 writes the span)
        return TraceFile(str(p), _table_from_rows(rows, str(p)), metadata)
    if not n_complete:
        raise TraceError(bad_trace(p, "no complete ('ph': 'X') events: not a profiler trace"))
    if not rows:  # a trial's hand-made events without `cat` read as "nothing ran under the profiler"
        raise TraceError(bad_trace(p, no_category_read(n_complete)))
    return TraceFile(str(p), _table_from_rows(rows, str(p)), metadata)


# The machine-speed references of a capture, as the header of a trace opprof exported holds them.
REFERENCE_KEYS = ("reference_ns", "dispatch_reference_ns", "small_reference_ns")


def load_trace(path: str | os.PathLike[str]) -> Profile:
    """Read a Kineto/Chrome trace file and analyse it into a Profile."""
    with gc_paused():
        trace = read_trace(path)
        header = trace.metadata.get("opprof")
        opprof: dict[str, Any] = header if isinstance(header, dict) else {}  # a trace opprof exported
        # Its steps are fn's calls; another's may end in a loop's stray prof.step(), and so may ours
        # of a Profile read so (from_profiler, another's trace: a trial's read back with one more step)
        stray = not isinstance(header, dict) or header.get("stray_step") is True
        profile = analyze(trace.table, source=trace.path, metadata=trace.metadata, stray_step=stray)
    profile = replace(profile, list_shapes=trace.table.has_shapes)  # Kineto's Input Dims hold lists' shapes
    # A trace we exported carries the machine-speed references of its capture.
    matmul, dispatch, small = (_reference_ns(opprof.get(key)) for key in REFERENCE_KEYS)
    if matmul or dispatch or small:
        profile = replace(profile, reference_ns=matmul, dispatch_reference_ns=dispatch, small_reference_ns=small)
    threads = _positive_int(opprof.get("threads"))
    if threads is not None and threads <= MAX_THREADS:
        profile = replace(profile, threads=threads)
    wait = _fraction(opprof.get("cpu_wait"))
    overhead = _ratio(opprof.get("overhead"))
    if overhead is not None:
        check = overhead_check(overhead, wait)  # the run's observer effect, as judged
        profile = replace(profile, overhead=overhead, checks=profile.checks + ((check,) if check else ()))
    others = _other_threads(opprof.get("other_threads"))
    if others:  # the live capture's `other_threads` warning: the events hold no sign of those threads
        profile = with_other_threads(profile, others)
    if contended := contention_check(wait, others):  # the test's contention warning, as the run gave it
        profile = replace(profile, checks=(*profile.checks, contended))
    if "work" in opprof:
        profile = _with_exported_work(profile, opprof, str(path))
    if opprof.get("cut_in_step") is True:  # the live capture's checks, not a warning it never gave
        checks = last_step_partial(profile.checks, profile.ops, len(profile.step_spans))
        profile = replace(profile, checks=checks, cut_in_step=True)
    workload = _workload_reference(opprof.get("workload_reference"))
    return replace(profile, workload_reference=workload) if workload else profile


def _other_threads(value: object) -> tuple[OtherThread, ...]:
    """The other Python threads our header names; a value of any other shape (hand-edited) is none."""
    if not isinstance(value, list):
        return ()
    threads = [_other_thread(item) for item in value if isinstance(item, dict)]
    return tuple(t for t in threads if t is not None)


def _other_thread(item: dict[str, Any]) -> OtherThread | None:
    name, cpu, count, worked = item.get("name"), item.get("cpu_ms"), item.get("count", 1), item.get("given_work", True)
    cpu_ms = None if cpu is None else _milliseconds(cpu)
    if not isinstance(name, str) or (cpu is not None and cpu_ms is None) or type(worked) is not bool:
        return None
    counted = _positive_int(count)
    return OtherThread(name, cpu_ms, counted, worked) if counted is not None and counted <= MAX_COUNT else None


def _workload_reference(value: object) -> WorkloadReference | None:
    """The workload reference our header carries; anything else (hand-edited) is left unknown."""
    if not isinstance(value, dict):
        return None
    op, shapes, dtypes, ns = value.get("op"), value.get("shapes"), value.get("dtypes"), _positive_int(value.get("ns"))
    if ns is None or workload_problem(op, shapes, dtypes) is not None:
        return None  # the rule a baseline's is read by (documents.WorkloadEntry)
    assert isinstance(shapes, list) and isinstance(dtypes, list) and isinstance(op, str)
    return WorkloadReference(op, tuple(tuple(s) for s in shapes), tuple(dtypes), ns)


def _fraction(value: object) -> float | None:
    """A share written by us that may be 0 or exceed 1 (a CPU wait summed over threads)."""
    if value == 0 and not isinstance(value, bool):
        return 0.0
    return _ratio(value)


def _ratio(value: object) -> float | None:
    """A positive ratio written by us."""
    number = _header_number(value)
    return number if number is not None and 0 < number < 1e6 else None


MAX_COUNT = 10**6  # threads of one name in a header: more is a hand edit


def _milliseconds(value: object) -> float | None:
    """A time >= 0 written by us ("0.0" is an idle pool worker's)."""
    number = _header_number(value)
    return number if number is not None and math.isfinite(number) and number >= 0 else None


def _header_number(value: object) -> float | None:
    """A number our header holds: floats are read as their text, for exact timestamps."""
    if not isinstance(value, (str, int)) or isinstance(value, bool) or len(str(value)) > _MAX_NUMBER_TEXT:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


_MAX_REFERENCE_NS = 10**15  # 11 days: a reading past it is none


def _reference_ns(value: object) -> int | None:
    """A machine reference from a trace's header, or None where it is no reading (a review's 10**40
    made `opprof compare` raise from its baseline document: ms past 1e30)."""
    found = _positive_int(value)
    return found if found is not None and found < _MAX_REFERENCE_NS else None


def _check_work(name: str, work: OpWork, steps: int) -> None:
    """ValueError where an op's exported work holds a per-step series that is not one count >= 0 a
    work step: a hand-edited header's `[-3]` was read as -3 calls, and `opprof compare` of the
    trace then ended in a traceback (exit 1, as for a regression)."""
    series = [
        ("flops_per_step", work.flops_per_step),
        *((f"bytes_per_step of {copy}", d) for copy, d in work.bytes_per_step),
        *(("calls_per_step of a signature", s.calls_per_step) for s in work.signatures),
        *((("autograd_per_step", work.autograd_per_step),) if work.autograd_per_step is not None else ()),
    ]
    for what, dist in series:
        if len(dist.samples) != steps or min(dist.samples, default=0) < 0:
            raise ValueError(f"op {name!r}: {what} {list(dist.samples)!r} is not {steps} counts >= 0, one a work step")


def _with_exported_work(profile: Profile, opprof: dict[str, Any], source: str) -> Profile:
    """The ops' work that a trace we exported carries in its header (a run()'s signature step)."""
    try:
        work = {str(name): OpWork.from_json(data) for name, data in opprof["work"].items()}
        steps = opprof.get("work_steps")
        if type(steps) is not int or steps < 0:
            raise ValueError(f"work_steps {steps!r}")
        for name, entry in work.items():
            _check_work(name, entry, steps)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise TraceError(bad_trace(source, f"the 'opprof.work' header is malformed ({exc})")) from None
    return profile.with_work(work, steps, opprof.get("list_shapes") is True) if work else profile
