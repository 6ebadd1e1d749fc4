"""pytest-opprof: operator-level performance assertions for PyTorch, as a pytest plugin."""

from __future__ import annotations

import importlib as _importlib
import sys as _sys
import types as _types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .analysis import Check, KernelStats, MemoryOpStats, OpStats, Profile, analyze
    from .capture import capture, measure
    from .errors import CaptureError, OpprofError, OpprofUsageError, TraceError
    from .events import Event
    from .kineto import from_profiler
    from .trace import load_trace

__version__ = "0.1.0.dev0"

# Each public name and the module that defines it, imported when the name is first used: pytest
# imports this package for its plugin in every run, and a run without --opprof needs none of them.
_PUBLIC = {
    "CaptureError": "errors",
    "Check": "analysis",
    "Event": "events",
    "KernelStats": "analysis",
    "MemoryOpStats": "analysis",
    "OpStats": "analysis",
    "OpprofError": "errors",
    "OpprofUsageError": "errors",
    "Profile": "analysis",
    "TraceError": "errors",
    "analyze": "analysis",
    "capture": "capture",
    "from_profiler": "kineto",
    "load_trace": "trace",
    "measure": "capture",
}

__all__ = [
    "CaptureError",
    "Check",
    "Event",
    "KernelStats",
    "MemoryOpStats",
    "OpStats",
    "OpprofError",
    "OpprofUsageError",
    "Profile",
    "TraceError",
    "__version__",
    "analyze",
    "capture",
    "from_profiler",
    "load_trace",
    "measure",
]


if not TYPE_CHECKING:  # type checkers read the imports above: a mistyped name stays their error

    def __getattr__(name: str) -> Any:
        module = _PUBLIC.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(_importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value  # once: later uses read it as any module attribute
        return value


def __dir__() -> list[str]:
    return sorted(__all__)  # the public names, imported or not yet


class _Package(_types.ModuleType):
    """`pytest_opprof.capture` is the public function, also once its submodule of that name is
    imported: Python then sets the package's attribute to the submodule (`from pytest_opprof
    import capture` gave a module, `capture()` raised "'module' object is not callable"), which
    the eager package overwrote by importing the function after it. The submodule stays in
    sys.modules (`importlib.import_module("pytest_opprof.capture")`)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _PUBLIC and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
