"""The arguments of run() and measure(): whether fn can be called as given, said in one line
before any step runs (a coroutine function, a keyword of its own taken by run(), a misspelt
`warmup`/`steps`). torch is read only where an op's schema is asked for."""

from __future__ import annotations

import difflib
import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any, TypeVar, cast

from .errors import (
    OpprofUsageError,
    bad_argument,
    fn_expected,
    fn_keyword_taken,
    fn_missing,
    run_keyword_slip,
)

MAX_STEPS = 10_000


def _async_fix() -> str:
    """How to measure an async def: asyncio.run, unless an event loop runs here (an async test),
    where asyncio.run cannot (a trial's followed the advice: `cannot be called from a running
    event loop`)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return "pass lambda: asyncio.run(fn(...))"
    return (
        "an event loop runs here (an async test), where asyncio.run cannot: measure the awaits as one step, "
        "with opprof.capture(): await fn(...)"
    )


def validate_run_args(
    fn: object,
    warmup: object,
    steps: object,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    call: str = "opprof.run",
) -> None:
    """Reject bad arguments to measure()/opprof.run() with one clear line (OpprofUsageError);
    `call`: which of them the messages name."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    if not callable(fn):
        raise OpprofUsageError(bad_argument("fn", fn, fn_expected(call)))
    taken = _run_keyword_taken(fn, args, kwargs or {})
    if taken:
        raise OpprofUsageError(fn_keyword_taken(taken, call))
    slip = _run_keyword_slip(fn, kwargs or {})
    if slip and kwargs:
        raise OpprofUsageError(run_keyword_slip(*slip, kwargs[slip[0]], call))
    called = (fn, getattr(fn, "__call__", None))  # noqa: B004  # an object's `async def __call__` too
    if any(inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f) for f in called):
        raise OpprofUsageError(
            bad_argument("fn", fn, "a function that does its work when called, not an async def (a call only "
            f"makes a coroutine); {_async_fix()}")
        )  # fmt: skip
    if any(inspect.isgeneratorfunction(f) for f in called):
        raise OpprofUsageError(
            bad_argument("fn", fn, "a function that does its work when called, not a generator (a call only "
            "makes one); pass lambda: list(fn(...))")
        )  # fmt: skip
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise OpprofUsageError(bad_argument("warmup", warmup, "a whole number >= 0"))
    if warmup > MAX_STEPS:  # a typo (10**20) would run the model for ever before any output
        raise OpprofUsageError(bad_argument("warmup", warmup, f"at most {MAX_STEPS:,}"))
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise OpprofUsageError(bad_argument("steps", steps, "a whole number >= 1"))
    if steps > MAX_STEPS:  # a typo (10**6): the profiler would hold every step's events in memory
        raise OpprofUsageError(
            bad_argument("steps", steps, f"at most {MAX_STEPS:,} (a capture holds every step's events in memory)")
        )


def _run_keyword_taken(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """'steps' or 'warmup' where fn needs a parameter of that name the call leaves without a value
    (opprof took the keyword for itself), else None; None too where fn's signature cannot be read."""
    try:
        signature = inspect.signature(fn)
        parameters, bound = signature.parameters, signature.bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
        return None
    for name in ("steps", "warmup"):
        parameter = parameters.get(name)
        if parameter is None or name in bound or parameter.default is not inspect.Parameter.empty:
            continue
        if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            return name
    return None


def _run_keyword_slip(fn: Callable[..., Any], kwargs: dict[str, Any]) -> tuple[str, str] | None:
    """(keyword, run()'s own) for a keyword meant for run() (`step=3`, `warm_up=1`) that fn
    does not take and would refuse with a TypeError after opprof's warm-up, else None."""
    parameters = _keywords_taken(fn)
    if parameters is None:
        return None
    for name in kwargs:
        if name in parameters:
            continue
        for own in ("steps", "warmup"):
            if difflib.SequenceMatcher(None, name.replace("_", "").lower(), own).ratio() >= _SLIP_RATIO:
                return name, own
    return None


def _keywords_taken(fn: Callable[..., Any]) -> set[str] | None:
    """The keywords fn takes, or None where it takes any (`**kwargs`) or they cannot be read. A
    TorchScript function's come from its schema, a torch built-in's (torch.relu) from its
    operator's overloads: a trial's `run(scripted, x, step=3)` got torch's error after the warm-up."""
    forward = getattr(fn, "forward", None)  # a module's call takes what its forward does
    target = forward if callable(forward) else fn
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return _schema_keywords(target)
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return None
    return set(parameters)


def _schema_keywords(fn: Any) -> set[str] | None:
    """The argument names of a TorchScript function's schema, or of every overload of the aten
    operator a torch built-in calls; None for another callable without a signature."""
    schema = getattr(fn, "schema", None)
    if schema is not None and hasattr(schema, "arguments"):
        return {a.name for a in schema.arguments}
    torch = sys.modules.get("torch")
    name = getattr(fn, "__name__", None)
    if torch is None or not isinstance(name, str) or getattr(fn, "__module__", None) not in ("torch", "torch._C._nn"):
        return None
    schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    return {a.name for s in schemas for a in s.arguments} if schemas else None


_SLIP_RATIO = 0.75  # step, warm_up, n_steps, stpes, warm; not sleep, stop, iters


F = TypeVar("F", bound=Callable[..., Any])


def fn_first(call: str, method: bool = True) -> Callable[[F], F]:
    """A profiling call whose first argument, the function, is there: `opprof.run()` and
    `opprof.run(fn=model)` (a keyword fn goes to the function) raised Python's bare TypeError
    (an audit); `call` is the name its message gives."""

    def checked(profiling: F) -> F:
        @functools.wraps(profiling)
        def first(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            if len(args) < (2 if method else 1):
                raise OpprofUsageError(fn_missing(call, "fn" in kwargs))
            return profiling(*args, **kwargs)

        return cast(F, first)

    return checked
