"""The public API documents itself: every name in pytest_opprof.__all__, every public method and
property of its classes and of the records a Profile holds, and the fixture's methods."""

from __future__ import annotations

import inspect

import pytest_opprof
from pytest_opprof import analysis
from pytest_opprof.fixture import OpprofFixture

RECORDS = [
    getattr(analysis.model, name) for name in dir(analysis.model) if inspect.isclass(getattr(analysis.model, name))
]


def public_members(cls: type) -> list[tuple[str, object]]:
    return [
        (name, member)
        for name, member in vars(cls).items()
        if not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, (property, classmethod)))
    ]


def undocumented() -> list[str]:
    missing = []
    objects = [getattr(pytest_opprof, name) for name in pytest_opprof.__all__ if name != "__version__"]
    classes = {
        o
        for o in [*objects, *RECORDS, OpprofFixture]
        if inspect.isclass(o) and o.__module__.startswith("pytest_opprof")
    }
    for obj in objects:
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and not inspect.getdoc(obj):
            missing.append(obj.__qualname__)
    for cls in sorted(classes, key=lambda c: c.__qualname__):
        if not cls.__doc__:
            missing.append(cls.__qualname__)
        for name, member in public_members(cls):
            target = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
            if not inspect.getdoc(target):
                missing.append(f"{cls.__qualname__}.{name}")
    return missing


def test_the_public_api_has_docstrings():
    """No public name, method or property of the API lacks a docstring."""
    assert undocumented() == []
