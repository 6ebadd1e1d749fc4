"""A stand-in for the `pynvml` module of nvidia-ml-py: one GPU, configurable facts and failures.

Only what pytest_opprof.device calls. Errors mirror nvidia-ml-py's class names.
"""

from __future__ import annotations

import types
from typing import Any


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801 - nvidia-ml-py's names
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801
    pass


class NVMLError_NoPermission(NVMLError):  # noqa: N801
    pass


ERRORS = {
    "LibraryNotFound": NVMLError_LibraryNotFound,
    "NotSupported": NVMLError_NotSupported,
    "NoPermission": NVMLError_NoPermission,
}

H200 = {
    "name": "NVIDIA H200",
    "uuid": "GPU-5f0e6c2a-0000-1111-2222-333344445555",
    "driver": "550.54.15",
    "cuda_driver": 12040,
    "sm_clock": 1980,
    "sm_clock_max": 1980,
    "mem_clock": 3201,
    "mem_clock_max": 3201,
    "power_limit_mw": 700000,
    "temperature": 41,
    "persistence": 1,
    "mig": (0, 0),
    "reasons": 0,
}


def make(
    gpu: dict[str, Any] | None = None,
    *,
    init_error: str | None = None,
    failing: dict[str, str] | None = None,
    old_api: bool = False,
) -> types.ModuleType:
    """A fake pynvml module. `failing` maps a function name to the error it raises;
    `old_api` drops nvmlDeviceGetCurrentClocksEventReasons (nvidia-ml-py before 12.535)."""
    facts = dict(H200, **(gpu or {}))
    failing = failing or {}
    mod = types.ModuleType("pynvml")
    mod.calls = {"init": 0, "shutdown": 0}  # type: ignore[attr-defined]
    mod.NVMLError = NVMLError  # type: ignore[attr-defined]
    handle = object()

    def fn(name: str, value: Any) -> None:
        def call(*args: Any) -> Any:
            if name in failing:
                raise ERRORS[failing[name]]()
            return value(*args) if callable(value) else value

        setattr(mod, name, call)

    def init() -> None:
        if init_error:
            raise ERRORS[init_error]()
        mod.calls["init"] += 1  # type: ignore[attr-defined]

    def shutdown() -> None:
        mod.calls["shutdown"] += 1  # type: ignore[attr-defined]

    mod.nvmlInit = init  # type: ignore[attr-defined]
    mod.nvmlShutdown = shutdown  # type: ignore[attr-defined]
    fn("nvmlDeviceGetCount", 1)

    def by_uuid(uuid: str) -> Any:
        if uuid != facts["uuid"]:
            raise NVMLError("not found")
        return handle

    fn("nvmlDeviceGetHandleByUUID", by_uuid)

    def by_index(index: int) -> Any:
        if index != 0:  # one GPU: NVML refuses any other index (NVML_ERROR_INVALID_ARGUMENT)
            raise NVMLError("invalid argument")
        return handle

    fn("nvmlDeviceGetHandleByIndex", by_index)
    fn("nvmlDeviceGetName", facts["name"])
    fn("nvmlDeviceGetUUID", facts["uuid"])
    fn("nvmlSystemGetDriverVersion", facts["driver"])
    fn("nvmlSystemGetCudaDriverVersion", facts["cuda_driver"])
    fn("nvmlDeviceGetClockInfo", lambda h, kind: facts["sm_clock"] if kind == 1 else facts["mem_clock"])
    fn("nvmlDeviceGetMaxClockInfo", lambda h, kind: facts["sm_clock_max"] if kind == 1 else facts["mem_clock_max"])
    fn("nvmlDeviceGetPowerManagementLimit", facts["power_limit_mw"])
    fn("nvmlDeviceGetTemperature", facts["temperature"])
    fn("nvmlDeviceGetPersistenceMode", facts["persistence"])
    fn("nvmlDeviceGetMigMode", facts["mig"])
    fn("nvmlDeviceGetCurrentClocksThrottleReasons", lambda h: facts["reasons"])
    if not old_api:
        fn("nvmlDeviceGetCurrentClocksEventReasons", lambda h: facts["reasons"])
    return mod


def torch_gpu(name: str = "NVIDIA H200", uuid: str = H200["uuid"], hip: str | None = None) -> dict[str, Any]:
    """What device._torch_facts reports when torch uses a GPU."""
    return {
        "torch": "2.13.0",
        "torch_threads": 8,
        "cuda": None if hip else "12.4",
        "hip": hip,
        "gpu_count": 1,
        "gpu_name": name,
        "gpu_capability": "9.0",
        "gpu_uuid": None if hip else uuid,
    }
