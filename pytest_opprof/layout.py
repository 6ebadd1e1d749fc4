"""Where the baseline folder is and how its paths are shown: the part of the `.opprof/` layout the
plugin reads before it measures anything (and without --opprof), apart from `baseline`, which
reads and writes the files and imports the analysis."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_BASELINE_DIR = ".opprof"


_LOOKED_AT = 2000  # entries a device-key folder is searched for a baseline file: /etc is no baseline folder


def baseline_root(rootpath: Path, baseline_dir: str | None) -> Path:
    """The baseline folder: --opprof-baseline-dir (relative to the rootdir) or .opprof there."""
    root = Path(baseline_dir) if baseline_dir else Path(DEFAULT_BASELINE_DIR)
    return root if root.is_absolute() else rootpath / root


def shown_path(path: Path, rootpath: Path) -> str:
    """A path as messages show it: relative to the rootdir where it can be."""
    try:
        return str(path.relative_to(rootpath))
    except ValueError:
        return str(path)


def holds_json(folder: Path) -> bool:
    """Whether a .json file lies in `folder` or below, among its first _LOOKED_AT entries."""
    seen = 0
    for _, _, files in os.walk(folder):
        if any(f.endswith(".json") for f in files):
            return True
        seen += len(files) + 1
        if seen > _LOOKED_AT:
            return False
    return False


def reached_from(path: Path, start: Path) -> str:
    """`path` as a command run in `start` names it: relative, or whole where no relative path
    reaches it (another drive, on Windows, where relpath raises)."""
    try:
        return os.path.relpath(path, start)
    except ValueError:
        return str(path)
