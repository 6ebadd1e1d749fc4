"""torch as opprof calls it on its own behalf during a test: its machine references, its busy
pauses and its readings of the thread count go to torch's functions as they were before any
test ran, not to what a test put in their place.

A test that spies on or mocks torch's functions (pytest-mock's `mocker.spy(torch, "mm")`,
`mocker.patch("torch.get_num_threads")`, monkeypatch) must see its own calls only: a trial's
spy counted 169 calls of `torch.mm` around a capture of one (the references'), a `torch.add`
made to raise failed the test with a traceback from opprof's dispatch reference, a mocked
`torch.get_num_threads` recorded a baseline of 8 threads on a 2-CPU machine, and a
monkeypatched `torch.ones` one whose matmul reference read 0.0018 ms.

`keep(torch)` takes the functions from torch._C, where `torch.mm` and the others are bound at
import and a test's patch of `torch.mm` does not reach (the plugin calls it before the first test;
elsewhere the first `own()` does); `own(torch)` gives torch with those functions as kept, every
other attribute torch's own as it is now. Imports nothing of torch itself.
"""

from __future__ import annotations

import sys
from typing import Any

# The functions opprof calls on its own behalf while a test runs (references.py, capture.py's
# busy pause and thread counts, threadwatch.py's readings): the torch functions a test may spy on.
OWN_CALLS = (
    "mm",
    "addmm",
    "bmm",
    "add",
    "ones",
    "empty_like",
    "get_num_threads",
    "set_num_threads",
)


class OwnTorch:
    """torch with the functions of OWN_CALLS as they were when kept; any other attribute is
    torch's own, read when asked (torch.no_grad, torch.float32...)."""

    __slots__ = ("_module", "_kept")

    def __init__(self, module: Any, kept: dict[str, Any]) -> None:
        self._module, self._kept = module, kept

    def __getattr__(self, name: str) -> Any:
        kept = self._kept.get(name)
        return kept if kept is not None else getattr(self._module, name)


_KEPT: dict[int, OwnTorch] = {}  # by id of the torch module, once kept


def keep(torch: Any) -> OwnTorch:
    """Take torch's functions of OWN_CALLS as they are now, once per process and module (the
    first call's stand: call it before any test can replace them)."""
    kept = _KEPT.get(id(torch))
    if kept is None or kept._module is not torch:
        kept = _KEPT[id(torch)] = OwnTorch(torch, {name: _original(torch, name) for name in OWN_CALLS})
    return kept


def _original(torch: Any, name: str) -> Any:
    """torch's own function of that name: the builtin in torch._C that `torch.<name>` is bound to
    at import, out of reach of a patch of `torch.<name>` (kept while a mock was on, as by a first
    `measure()` inside `mock.patch`, the module's name would keep the mock for good: a review);
    the module's name where torch._C has none (a stand-in torch)."""
    c = getattr(torch, "_C", None)
    for home in (getattr(c, "_VariableFunctions", None), c):
        found = getattr(home, name, None) if home is not None else None
        if callable(found):
            return found
    return getattr(torch, name, None)


def own(torch: Any) -> Any:
    """`torch` for opprof's own calls: the real module with its functions as kept (kept now
    where they were not yet); a stand-in a test passed (a fake torch) as it is."""
    if isinstance(torch, OwnTorch):
        return torch
    if torch is not sys.modules.get("torch"):
        return torch
    return keep(torch)
