"""Events -> Profile: the measurement model and the analysis in named stages (pure, no torch).

One analysis serves both sources (live capture and trace file), so both give the same numbers.
"""

from __future__ import annotations

from .model import (
    ERROR,
    MAX_THREADS,
    NO_TENSOR_INPUTS,
    OK,
    OPPROF_SYNC_ANNOTATION,
    SCHEMA,
    STEP_NAME,
    SYNC_OPS,
    SYNC_RUNTIME_CALL,
    WARNING,
    Check,
    Dist,
    KernelStats,
    MemoryOpStats,
    OpStats,
    OpWork,
    Profile,
    RuntimeStats,
    Signature,
    StepSpan,
    inputs_text,
    ns_to_ms,
    union_ns,
)
from .stages import analyze

__all__ = [
    "ERROR",
    "MAX_THREADS",
    "NO_TENSOR_INPUTS",
    "OK",
    "OPPROF_SYNC_ANNOTATION",
    "SCHEMA",
    "STEP_NAME",
    "SYNC_OPS",
    "SYNC_RUNTIME_CALL",
    "WARNING",
    "Check",
    "Dist",
    "KernelStats",
    "MemoryOpStats",
    "OpStats",
    "OpWork",
    "Profile",
    "RuntimeStats",
    "Signature",
    "StepSpan",
    "analyze",
    "inputs_text",
    "ns_to_ms",
    "union_ns",
]
