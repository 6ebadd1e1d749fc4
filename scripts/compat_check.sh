#!/usr/bin/env bash
# The supported-versions matrix, run by hand before a release (CI pins torch 2.13 alone: each
# other torch is a multi-GB CUDA build to download). For each entry: a fresh venv with that torch
# and pytest, the plugin registered from this checkout (scripts/install_from_source.py, no build),
# and the whole suite.
#   bash scripts/compat_check.sh [WORKDIR]        (default /tmp/opprof-compat; logs beside the venvs)
# Last run: see "The project's tests" in docs/developing.md.
set -uo pipefail
cd "$(dirname "$0")/.."
WORK="${1:-/tmp/opprof-compat}"
mkdir -p "$WORK"
MATRIX=(
    "torch==2.6.0 pytest==8.3.5 numpy<2"   # the floor; numpy present
    "torch==2.7.1 pytest==8.4.2"
    "torch==2.9.1 pytest==8.2.2"
    "torch==2.11.0 pytest==8.0.0"           # the H200 image's torch; the oldest pytest 8
    "torch==2.14.1 pytest==9.2.0"           # the newest torch we admit
)
status=0

# suite LABEL NAME PYTHON REQUIREMENT...: a venv made once (again where its install failed) with
# those requirements, the plugin registered from this checkout, and the whole suite.
suite() {
    local label=$1 name=$2 python=$3
    shift 3
    local venv="$WORK/$name"
    echo "== $label"
    if [ ! -f "$venv/.installed" ]; then
        rm -rf "$venv"
        "$python" -m venv "$venv" && "$venv/bin/python" -m pip install -q "$@" pytest-xdist tabulate nvidia-ml-py \
            > "$WORK/$name.install.log" 2>&1 && touch "$venv/.installed" \
            || { echo "== $label: install failed ($WORK/$name.install.log)"; status=1; return; }
    fi
    "$venv/bin/python" scripts/install_from_source.py > /dev/null \
        || { echo "== $label: the plugin could not be registered"; status=1; return; }
    "$venv/bin/python" -m pytest -q -n 2 -p no:cacheprovider > "$WORK/$name.log" 2>&1
    local rc=$?
    echo "== $label: $(tail -n 1 "$WORK/$name.log") (exit $rc; log $WORK/$name.log)"
    [ "$rc" = 0 ] || status=1
}

for entry in "${MATRIX[@]}"; do
    # shellcheck disable=SC2086  # the entry is several requirements
    suite "$entry" "$(echo "$entry" | sed 's/[^A-Za-z0-9.]\{1,\}/_/g')" python3 $entry
done

# Every Python that requires-python admits (3.10 on), where this machine has one: torch publishes
# no wheel here but for CPython 3.11, so these run without torch. The pure core (events, trace,
# analysis, baseline, compare, report, the opprof command) must pass; the modules that need torch skip.
for version in 3.10 3.12 3.13 3.14; do
    python=""  # on PATH, else pyenv's (its shim on PATH fails for a version not selected)
    for candidate in $(command -v "python$version") "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/python; do
        if "$candidate" -c pass 2>/dev/null; then python=$candidate; break; fi
    done
    if [ -z "$python" ]; then
        echo "== python $version: not on this machine, skipped"
        continue
    fi
    suite "python $version (without torch)" "python$version-without-torch" "$python" pytest
done
exit $status
