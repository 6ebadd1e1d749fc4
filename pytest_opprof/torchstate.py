"""torch's process-wide settings that change what a measurement measures, as a test can leave
them for the tests after it: the thread count, the default dtype, grad mode, deterministic
algorithms, anomaly detection, the float32 matmul precision, the default device, the oneDNN
and cuDNN switches, and torch.distributed's default process group. A record of them
(`TorchState`), what changed between two (`changes`), and the words and code the leak messages
use. Pure: the plugin reads the settings (capture.torch_state)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(slots=True)  # not frozen: its __init__ took 2 us of a 9 us reading (never changed once made)
class TorchState:
    """torch's settings at one moment (the defaults: a fresh process's)."""

    threads: int
    dtype: str = "float32"  # torch.get_default_dtype(), without `torch.`
    grad: bool = True
    deterministic: bool = False
    anomaly: bool = False
    matmul: str = "highest"  # torch.get_float32_matmul_precision(), or MIXED_MATMUL's per-backend values
    cudnn_benchmark: bool = False
    device: str | None = None  # torch.set_default_device's (None: not set); with "cpu" too, each op pays its mode
    mkldnn: bool = True  # torch.backends.mkldnn.enabled: oneDNN's CPU kernels (convolutions...)
    cudnn: bool = True  # torch.backends.cudnn.enabled
    cudnn_deterministic: bool = False  # torch.backends.cudnn.deterministic
    cudnn_tf32: bool | str = True  # torch.backends.cudnn.allow_tf32, or MIXED's per-operator values
    fp16_reduction: bool = True  # torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    bf16_reduction: bool = True  # torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    fp32: str | None = "none"  # torch.backends.fp32_precision (torch 2.9+; None: older torch)
    process_group: bool = False  # torch.distributed's default process group initialised


SETTING_NAMES = tuple(f.name for f in fields(TorchState))
MIXED = "="  # in a value: torch 2.9+'s fp32_precision API set beside the legacy one, where torch's
# legacy getter raises (a trial's conftest), as the backends' own values: `cuda.matmul=ieee/mkldnn.matmul=bf16`
PROFILED_DTYPES = {"float64": "double", "float32": "float", "float16": "c10::Half", "bfloat16": "c10::BFloat16"}


@dataclass(frozen=True, slots=True)
class _Setting:
    words: str  # how the messages name it: `thread count`
    shown: Callable[[Any], str]  # its value in the messages
    restore: Callable[[Any], str]  # the call that sets it back to a value
    left: Callable[[Any], str]  # what a test ran with: `the default dtype float64`, `grad mode off`


def _on(value: Any) -> str:
    return "on" if value else "off"


def _valued(words: str, shown: Callable[[Any], str], restore: Callable[[Any], str]) -> _Setting:
    """A setting with a value: a test ran with `the default dtype float64`."""
    return _Setting(words, shown, restore, lambda v: f"the {words} {shown(v)}")


def _switch(words: str, restore: Callable[[Any], str]) -> _Setting:
    """A setting on or off: a test ran with `grad mode off`."""
    return _Setting(words, _on, restore, lambda v: f"{words} {_on(v)}")


def mixed(values: dict[str, str]) -> str:
    """A MIXED value: the fp32_precision of each backend named (`cuda.matmul`: its key)."""
    return "/".join(f"{name}{MIXED}{value}" for name, value in values.items())


def _restore_of(legacy: Callable[[Any], str]) -> Callable[[Any], str]:
    """The code that sets a setting back to a value: `legacy`'s, or a MIXED value's fp32_precision
    assignments."""

    def restore(value: Any) -> str:
        if not isinstance(value, str) or MIXED not in value:
            return legacy(value)
        pairs = [part.split(MIXED, 1) for part in value.split("/")]
        return "; ".join(f'torch.backends.{name}.fp32_precision = "{setting}"' for name, setting in pairs)

    return restore


def _on_or_mixed(value: Any) -> str:
    return value if isinstance(value, str) else _on(value)


_SETTINGS = {
    "threads": _valued("thread count", str, lambda v: f"torch.set_num_threads({v})"),
    "dtype": _valued("default dtype", str, lambda v: f"torch.set_default_dtype(torch.{v})"),
    "grad": _switch("grad mode", lambda v: f"torch.set_grad_enabled({v})"),
    "deterministic": _switch("deterministic algorithms", lambda v: f"torch.use_deterministic_algorithms({v})"),
    "anomaly": _switch("anomaly detection", lambda v: f"torch.autograd.set_detect_anomaly({v})"),
    "matmul": _valued(
        "float32 matmul precision", str, _restore_of(lambda v: f'torch.set_float32_matmul_precision("{v}")')
    ),
    "cudnn_benchmark": _switch("cuDNN benchmark mode", lambda v: f"torch.backends.cudnn.benchmark = {v}"),
    "device": _Setting(
        "default device",
        lambda v: "not set" if v is None else v,
        lambda v: f"torch.set_default_device({v!r})",
        lambda v: "no default device" if v is None else f"the default device {v}",
    ),
    "mkldnn": _switch("oneDNN (torch.backends.mkldnn)", lambda v: f"torch.backends.mkldnn.enabled = {v}"),
    "cudnn": _switch("cuDNN", lambda v: f"torch.backends.cudnn.enabled = {v}"),
    "cudnn_deterministic": _switch("cuDNN deterministic mode", lambda v: f"torch.backends.cudnn.deterministic = {v}"),
    "cudnn_tf32": _Setting(
        "cuDNN TF32",
        _on_or_mixed,
        _restore_of(lambda v: f"torch.backends.cudnn.allow_tf32 = {v}"),
        lambda v: f"cuDNN TF32 {_on_or_mixed(v)}",
    ),
    "fp16_reduction": _switch(
        "reduced-precision fp16 matmul reductions",
        lambda v: f"torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = {v}",
    ),
    "bf16_reduction": _switch(
        "reduced-precision bf16 matmul reductions",
        lambda v: f"torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = {v}",
    ),
    "fp32": _valued("fp32 precision of torch.backends", str, lambda v: f'torch.backends.fp32_precision = "{v}"'),
    "process_group": _Setting(
        "distributed default process group",
        lambda v: "initialised" if v else "not initialised",
        lambda v: (
            "torch.distributed.init_process_group(<as before>)" if v else "torch.distributed.destroy_process_group()"
        ),
        lambda v: f"torch.distributed's default process group {'initialised' if v else 'destroyed'}",
    ),
}


@dataclass(frozen=True, slots=True)
class Change:
    """One setting that differs: its name (a TorchState field), and its value before and after."""

    name: str
    before: Any
    after: Any

    @property
    def text(self) -> str:
        """`default dtype float32 -> float64`"""
        setting = _SETTINGS[self.name]
        return f"{setting.words} {setting.shown(self.before)} -> {setting.shown(self.after)}"

    @property
    def left(self) -> str:
        """What a test ran with after it: `the default dtype float64`, `grad mode off`."""
        return _SETTINGS[self.name].left(self.after)

    @property
    def restore(self) -> str:
        """`torch.set_default_dtype(torch.float32)`"""
        return _SETTINGS[self.name].restore(self.before)


def changes(before: TorchState, after: TorchState) -> tuple[Change, ...]:
    """The settings that differ between `before` and `after`, in TorchState's order."""
    return tuple(
        Change(f.name, getattr(before, f.name), getattr(after, f.name))
        for f in fields(TorchState)
        if getattr(before, f.name) != getattr(after, f.name)
    )


def threads_only(before: TorchState, after: TorchState) -> bool:
    """Whether the thread count is all that differs (the thread leak messages' own words)."""
    return [c.name for c in changes(before, after)] == ["threads"]


def _joined(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def changed_text(before: TorchState, after: TorchState) -> str:
    """`torch's default dtype float32 -> float64 and grad mode on -> off`"""
    return "torch's " + _joined([c.text for c in changes(before, after)])


def left_text(before: TorchState, after: TorchState) -> str:
    """What the tests after a leak ran with: `the default dtype float64 and grad mode off`."""
    return _joined([c.left for c in changes(before, after)])


def restore_code(before: TorchState, after: TorchState) -> str:
    """`torch.set_default_dtype(torch.float32); torch.set_grad_enabled(True)`"""
    return "; ".join(c.restore for c in changes(before, after))


def seen_in(
    before: TorchState,
    left: TorchState,
    now: TorchState | None,
    threads: int | None,
    dtypes: frozenset[str] | None = None,
    collectives: bool | None = None,
) -> TorchState:
    """The part of a leak (`before` -> `left`) a measurement ran on; the others as before the
    leak (the test set them itself). The thread count: where the profile's (`threads`) is the
    leaked one; the default dtype: where the profile's ops took inputs of it (`dtypes`: their
    input types as the profiler names them), as a model built in a fixture does, in the dtype of
    its setup (a review's test set float32 around run() on a model built in float64 and recorded
    double); the default device: always (tensors are made before the capture); a process group
    left initialised: where the profile ran collectives (`collectives`: c10d ops; a trial's test
    all-reduced only where a group was up, and was told to record the leak), not every test after
    it, and one destroyed: never (a review's plain matmul test after it was not recorded); the
    others: where their value as the capture began (`now`) is the leaked one. Unknown: it ran on
    it."""
    kept = {}
    for change in changes(before, left):
        if change.name == "threads":
            ran = threads is None or threads == left.threads
        elif change.name == "dtype":
            profiled = PROFILED_DTYPES.get(str(change.after))
            ran = dtypes is None or profiled is None or profiled in dtypes
        elif change.name == "device":
            ran = True
        elif change.name == "process_group":  # destroyed: a test that needs it errs, one that does not ran alike
            ran = change.after and (collectives is None or collectives)
        else:
            ran = now is None or getattr(now, change.name) == change.after
        kept[change.name] = change.after if ran else change.before
    return replace(before, **kept)


@dataclass(frozen=True, slots=True)
class Left:
    """Settings earlier tests (`by`: errors.LEAKS_JOINED between them, or a wider fixture with
    errors.SCOPED_LEAKER) left changed from `before` to `after`, which a measurement ran on."""

    by: str
    before: TorchState
    after: TorchState

    @property
    def threads_only(self) -> bool:
        return threads_only(self.before, self.after)

    def to_dict(self) -> dict[str, Any]:
        """{"by": ..., "changed": {"dtype": ["float32", "float64"]}}: the JSON's `settings_left`."""
        return {"by": self.by, "changed": {c.name: [c.before, c.after] for c in changes(self.before, self.after)}}

    @classmethod
    def from_dict(cls, data: Any) -> Left | None:
        """The inverse of to_dict (from an xdist worker); the settings it does not name as fresh."""
        if not isinstance(data, dict):
            return None
        changed = {name: pair for name, pair in data.get("changed", {}).items() if name in _SETTINGS}
        if not changed:
            return None
        threads = changed.pop("threads", [0, 0])
        before = replace(TorchState(threads[0]), **{name: pair[0] for name, pair in changed.items()})
        after = replace(TorchState(threads[1]), **{name: pair[1] for name, pair in changed.items()})
        return cls(str(data.get("by", "")), before, after)

    def without_threads(self) -> Left | None:
        """The leak but for its thread count (a baseline on that count keeps it), or None."""
        after = replace(self.after, threads=self.before.threads)
        return None if after == self.before else Left(self.by, self.before, after)
