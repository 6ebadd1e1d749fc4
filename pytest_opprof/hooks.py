"""The hooks pytest-opprof adds to pytest (registered by the plugin package)."""

from __future__ import annotations

from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("pytest")


@hookspec(firstresult=True)
def pytest_opprof_device_key(config: Any, facts: dict[str, Any]) -> str | None:
    """Return the device key (the baseline folder) for this run, or None for the default.

    `facts` are the device facts (see `opprof show` or --opprof-json). Use it to share
    baselines between machines you know to be equal, or to split them by a fact the default
    key ignores. --opprof-device-key on the command line wins over this hook.
    """
