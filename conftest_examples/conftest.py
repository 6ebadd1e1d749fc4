"""Shared by every example folder (the rootdir conftest of the examples).

The device-key hook lives here because pytest-opprof asks for the key once, at start: a hook
in a sub-folder's conftest.py would only be seen when that folder is run on its own.
"""

from __future__ import annotations

import os


def pytest_opprof_device_key(config, facts):
    """Split baselines by CI runner type as well as by device: `OPPROF_RUNNER=ci-large` gives
    `cpu-x86_64-ci-large` (or `nvidia-h200-ci-large`). Unset: the default key (return None)."""
    runner = os.environ.get("OPPROF_RUNNER")
    if not runner:
        return None
    from pytest_opprof.device import device_key  # the key the facts give by default

    return f"{device_key(facts)}-{runner}"
