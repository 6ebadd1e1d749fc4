"""pytest-opprof: operator-level performance assertions for PyTorch, as a pytest plugin."""

from __future__ import annotations

from .analysis import Check, KernelStats, MemoryOpStats, OpStats, Profile, analyze
from .capture import capture, measure
from .errors import CaptureError, OpprofError, OpprofUsageError, TraceError
from .events import Event
from .kineto import from_profiler
from .trace import load_trace

__version__ = "0.1.0.dev0"

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
