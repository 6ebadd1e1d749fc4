"""Torch's reasons for the graph breaks Dynamo found while a capture ran, read from what Dynamo
keeps in `torch._dynamo.utils` (nothing is imported: empty when Dynamo is not loaded).

Two records, which torch versions fill differently:
- its `graph_break` and `unimplemented` counters, keyed by reason. torch 2.13 words each reason
  (title, explanation, hints) and counts a data-dependent branch only as `unimplemented`;
  torch 2.11 words it without its line; torch 2.6 counts such a branch nowhere.
- its `graph_break_reasons` list, one entry per break with the user's frames: the line it broke
  at, on every version we support (2.6 to 2.14), but a terse reason (`generic_jump
  TensorVariable()` for an `if` on a tensor).
We take the counters' wording where they have one, with the list's line where the wording names
none, and the list alone where the counters hold nothing new.
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any

_BREAK_COUNTERS = ("graph_break", "unimplemented")


@dataclass(frozen=True)
class BreaksSeen:
    """What Dynamo had recorded at one moment: its counted (counter, reason) pairs and the length
    of its list of breaks."""

    counted: Counter[tuple[str, str]]
    listed: int
    graphs: int | None = None  # graphs Dynamo compiled in the process so far (its `unique_graphs` stat), if kept


@dataclass(frozen=True)
class ListedBreak:
    """One entry of Dynamo's list: its reason and the innermost user frame it names, written as
    torch writes a location (`# File "m.py", line 7, in f, code: if y.sum() > 0:`)."""

    reason: str
    location: str
    inside: str = ""  # where a break inside torch's own code is (`torch/optim/optimizer.py:79`): its File line


def breaks_seen() -> BreaksSeen:
    return BreaksSeen(_counted(), len(_listed()), _graphs())


def graphs_since(before: BreaksSeen) -> int | None:
    """The graphs Dynamo compiled since `before`; None where it keeps no count, or reset its
    counters since (torch._dynamo.reset() in the run: the count no longer tells)."""
    now = _graphs()
    if now is None or before.graphs is None or now < before.graphs:
        return None
    return now - before.graphs


def _graphs() -> int | None:
    counters = getattr(_utils(), "counters", None)
    stats = counters.get("stats") if isinstance(counters, dict) else None
    if not isinstance(stats, dict):
        return None
    found = stats.get("unique_graphs", 0)  # a Counter: no graph compiled yet reads as absent
    return found if isinstance(found, int) else None


def new_break_reasons(before: BreaksSeen) -> list[str]:
    """The graph-break reasons recorded since `before`, one per break Dynamo listed, in its order,
    each in the counters' words where they have some for it (`graph_break`'s, else
    `unimplemented`'s, which also holds what breaks no graph, as a recompile limit: read only for
    a listed break) with its line where those words name none; then any counted `graph_break`
    no listed break matched. Without a list: the `graph_break` counter's, else `unimplemented`'s."""
    listed = _listed_since(before.listed)
    new = _counted() - before.counted
    counted = {key: [reason for counter, reason in new if counter == key] for key in _BREAK_COUNTERS}
    counted["unimplemented"] = [r for r in counted["unimplemented"] if not _LIMIT_HIT.search(r)]  # no break
    if not listed:
        return next((counted[key] for key in _BREAK_COUNTERS if counted[key]), [])
    worded = [(_words_for(b, counted), b) for b in _without_inner_twins(listed)]
    found = [_with_location(words, b) if words else _listed_text(b) for words, b in worded]
    matched = {words for words, _ in worded}
    found += [reason for reason in counted["graph_break"] if reason not in matched]
    return list(dict.fromkeys(found))


def _utils() -> Any:
    return sys.modules.get("torch._dynamo.utils")


def _counted() -> Counter[tuple[str, str]]:
    counters = getattr(_utils(), "counters", None)
    reasons: Counter[tuple[str, str]] = Counter()
    for key in _BREAK_COUNTERS:
        found = counters.get(key) if isinstance(counters, dict) else None
        reasons.update({(key, str(k)): v for k, v in found.items()} if found else {})
    return reasons


def _listed() -> list[Any]:
    found = getattr(_utils(), "graph_break_reasons", None)
    return found if isinstance(found, list) else []


def _listed_since(length: int) -> list[ListedBreak]:
    """The list's entries past `length` (all of them when it was cleared since: torch._dynamo.reset())."""
    entries = _listed()
    return [_listed_break(e) for e in entries[length if len(entries) >= length else 0 :]]


def _listed_break(entry: Any) -> ListedBreak:
    """The entry with its user's frame, and where the break itself lies in torch's own code below
    it (a trial's `opt.step()` broke at torch/optim/optimizer.py:79, and read as its own)."""
    stack = getattr(entry, "user_stack", None) or []
    frame = _users_frame(stack) if isinstance(stack, list) and stack else None
    location = inside = ""
    if frame is not None and getattr(frame, "filename", None):
        code = (getattr(frame, "line", "") or "").strip()
        location = f'# File "{frame.filename}", line {frame.lineno}, in {frame.name}' + (
            f", code: {code}" if code else ""
        )
        inner = _inner_torch_frame(stack, frame)
        if inner is not None:
            inside = f'# Inside torch: File "{inner.filename}", line {inner.lineno}, in {inner.name}'
    return ListedBreak(str(getattr(entry, "reason", entry)), location, inside)


def _inner_torch_frame(stack: list[Any], users: Any) -> Any:
    """The innermost frame below the user's, in torch's own code, where the break lies; None where
    there is none, or it is nn.Module's call machinery (a `torch.compiler.disable`d submodule's
    break is at the user's call of it, not in `_call_impl` or `Sequential.forward`: a review)."""
    below = stack[stack.index(users) + 1 :] if users in stack else []
    inner = below[-1] if below else None
    if inner is None or str(getattr(inner, "filename", "")).replace("\\", "/").endswith(_MODULE_CALLS):
        return None
    return inner if getattr(inner, "filename", None) else None


_MODULE_CALLS = ("torch/nn/modules/module.py", "torch/nn/modules/container.py")


def _without_inner_twins(listed: list[ListedBreak]) -> list[ListedBreak]:
    """Dynamo lists a break inside torch twice: from the user's frame, and from the resumed frame
    inside torch, all of whose frames are torch's (its location is that inner line): the first
    says both, so the second goes."""
    inner = {(b.reason, b.inside.removeprefix("# Inside torch: ")) for b in listed if b.inside}
    return [b for b in listed if (b.reason, b.location.removeprefix("# ").split(", code:")[0]) not in inner]


def _users_frame(stack: list[Any]) -> Any:
    """The innermost frame outside torch's own files: Dynamo's stack holds the frames it traced,
    torch's among them (a trial's break at a `torch.compiler.disable`d submodule was named at
    torch/nn/modules/module.py's `_call_impl`, not at the user's call); the innermost frame where
    every frame is torch's."""
    for frame in reversed(stack):
        filename = getattr(frame, "filename", None)
        if not isinstance(filename, str) or not in_torch(filename):
            return frame
    return stack[-1]


def in_torch(filename: str) -> bool:
    """Whether a source file is torch's own (in the folder of the torch package that runs); False
    where torch is not loaded."""
    torch_dir = _torch_dir()
    return bool(torch_dir) and os.path.abspath(filename).startswith(torch_dir or "")


def _torch_dir() -> str | None:
    """The folder of the torch package that runs (with a trailing separator); None when not loaded."""
    file = getattr(sys.modules.get("torch"), "__file__", None)
    return os.path.join(os.path.dirname(os.path.abspath(file)), "") if isinstance(file, str) else None


_JUMPED_WITH = re.compile(r"attempted to jump with (\S+)")


def _words_for(listed: ListedBreak, counted: dict[str, list[str]]) -> str:
    """The counted reason that words a listed break: one of the same words, or, for a
    data-dependent branch (torch 2.11 and 2.13 word it in `unimplemented`), the counter's
    `attempted to jump with X` for the list's `generic_jump X`; "" when none does."""
    for key in _BREAK_COUNTERS:
        for reason in counted[key]:
            jumped = _JUMPED_WITH.search(reason)
            if listed.reason == reason or (jumped and listed.reason == f"generic_jump {jumped.group(1)}"):
                return reason
    return ""


def _with_location(reason: str, listed: ListedBreak) -> str:
    """Torch's words with the listed break's line, where they name none."""
    if "# File " in reason or not listed.location:
        return reason
    return "\n".join(filter(None, (reason, listed.location, listed.inside)))


def _listed_text(listed: ListedBreak) -> str:
    return "\n".join(filter(None, (listed.reason, listed.location, listed.inside)))


_LIMIT_HIT = re.compile(r"recompile limit|cache.size.limit|recompile_limit", re.IGNORECASE)
_LIMIT_SET = re.compile(r"currently set to (\d+)")


def recompile_limit_hit(before: BreaksSeen) -> str | None:
    """Where Dynamo hit its recompile limit since `before` (and ran the frame eagerly from then
    on): the limit's value as torch words it (`2`), "" where its words hold none; None where it
    did not. torch 2.13 counts it as `unimplemented` (`Dynamo recompile limit exceeded ...
    currently set to 2`), which breaks no graph, so new_break_reasons leaves it out."""
    new = _counted() - before.counted
    hits = [reason for (counter, reason) in new if counter == "unimplemented" and _LIMIT_HIT.search(reason)]
    if not hits:
        return None
    value = _LIMIT_SET.search(hits[0])
    return value.group(1) if value else ""
