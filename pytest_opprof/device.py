"""Device facts and the device key. torch is imported lazily, and only when measuring.

The key names the hardware a measurement belongs to (`cpu-x86_64`, `nvidia-h200`): stable
across runs, free of volatile facts such as clocks or temperature.
"""

from __future__ import annotations

import os
import platform
import re
from typing import Any


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def slug(text: str) -> str:
    """`NVIDIA H200` -> `nvidia-h200`; `Tesla T4` -> `tesla-t4`."""
    return re.sub(r"[^a-z0-9_]+", "-", text.lower()).strip("-") or "unknown"


def device_facts() -> dict[str, Any]:
    """Facts about this machine's compute devices; a fact that cannot be read is None."""
    facts: dict[str, Any] = {
        "machine": platform.machine() or None,
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch": None,
        "torch_threads": None,
        "cuda": None,
        "hip": None,
        "gpu_name": None,
        "gpu_capability": None,
        "gpu_count": 0,
    }
    try:
        import torch
    except ImportError:
        return facts
    facts["torch"] = torch.__version__
    facts["torch_threads"] = torch.get_num_threads()
    facts["cuda"] = torch.version.cuda
    facts["hip"] = getattr(torch.version, "hip", None)
    try:
        if torch.cuda.is_available():
            facts["gpu_count"] = torch.cuda.device_count()
            facts["gpu_name"] = torch.cuda.get_device_name(0)
            facts["gpu_capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
    except Exception:  # a broken driver must not break the test run; the facts stay None
        pass
    return facts


def device_key(facts: dict[str, Any]) -> str:
    """The GPU name as a slug when a GPU is visible, else `cpu-<arch>`."""
    if facts.get("gpu_name"):
        name = slug(facts["gpu_name"])
        if facts.get("hip") and not name.startswith("amd"):
            name = f"amd-{name}"
        return name
    return f"cpu-{slug(facts.get('machine') or 'unknown')}"
