"""JSON text as opprof writes it for people and scripts alike (baseline files, `--json` output, the
JSON report): keys sorted, indented two spaces, and a list of plain values or of such lists (a
per-step series, a shape, dtypes) on one line. A diff then names the op a changed line belongs to,
a 1,000-step series is one line, not 1,000, and the plain values go through json's C encoder:
json.dumps with an indent runs its encoder in Python (a 100k-event profile's `opprof analyze
--json`: 61k lines and 1.2 MB in 30-49 ms before; 11k lines and 0.6 MB in 20-27 ms)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

_LISTS = (list, tuple)


def json_text(data: Any, ensure_ascii: bool = True) -> str:
    """`data` as JSON text, no final newline. `ensure_ascii=False` keeps non-ASCII characters as
    they are (a baseline file, UTF-8). A TypeError for what JSON cannot hold, as json.dumps raises."""
    leaf = json.JSONEncoder(ensure_ascii=ensure_ascii).encode  # no indent: json's C encoder
    out: list[str] = []
    _write(data, "\n", out, leaf)
    return "".join(out)


def _write(value: Any, newline: str, out: list[str], leaf: Callable[[Any], str]) -> None:
    """`newline`: a line break and the indent of the value's own line."""
    if isinstance(value, dict) and value:
        inner, sep = newline + "  ", "{"
        for key in sorted(value):
            out.append(f"{sep}{inner}{leaf(key if type(key) is str else _key_text(key))}: ")
            _write(value[key], inner, out, leaf)
            sep = ","
        out.append(newline + "}")
    elif isinstance(value, _LISTS) and value and not _flat(value):
        inner, sep = newline + "  ", "["
        for item in value:
            out.append(sep + inner)
            _write(item, inner, out, leaf)
            sep = ","
        out.append(newline + "]")
    else:
        out.append(leaf(value))


def _flat(values: list[Any] | tuple[Any, ...]) -> bool:
    """Plain values, or lists of them (a list of shapes): one line."""
    if not any(isinstance(v, (dict, *_LISTS)) for v in values):
        return True
    return all(not isinstance(v, dict) and (not isinstance(v, _LISTS) or _flat(v)) for v in values)


def _key_text(key: Any) -> str:
    """A key that is no text, as json.dumps writes it (`1`, `true`, `null`, `1.5`): json's own
    conversion; a TypeError for a key JSON cannot hold."""
    return next(iter(json.loads(json.dumps({key: 0}))))
