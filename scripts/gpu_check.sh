#!/usr/bin/env bash
# The one prepared run for a GPU machine (no network, a few minutes of device time):
#   bash scripts/gpu_check.sh [OUT]          (OUT defaults to $OUT, else ./gpu-out)
# 1. install the project without network (from the source tree if pip cannot build); 2. a probe
# of the profiler (versions, the route captures are read by, kernel records lost at later sessions'
# starts: scripts/gpu_probe.py); 3. the cuda-marked tests; 4. small recorded traces for tests/data/
# with torch's own key_averages() figures (what lasts: before the rest); 5. the GPU-only example,
# 6. the GPU benches (observer effect, capture speed); 7. the example suite on the GPU machine
# (JSON, HTML, CSV, traces; its reports are written at its end).
# Every step has its own timeout and the script goes on after a failure. OUT receives two files,
# rewritten after every step so a run cut short still brings back what ran: summary.txt (this
# output) and gpu-check.tar.gz (every log, report and trace; the device tool returns 8 files at most).
# Budget: the script stops starting steps once one could run past GPU_CHECK_BUDGET seconds (360 by
# default: a session has 15 minutes of device time, the machine's start and the transfers included,
# and room must stay for one rerun; a step killed at its limit takes 5 s more), so what matters most runs first and the CPU-side example suite last; a step that
# hangs gets SIGABRT at its limit, which Python's faulthandler answers with every thread's stack in
# the step's log, then SIGKILL 5 s later.
# A dry run of the plumbing without a GPU: GPU_CHECK_DEVICE=cpu bash scripts/gpu_check.sh /tmp/out
# (it installs nothing: this tree goes first on PYTHONPATH, so a shared environment's install of
# another checkout is left as it was).
set -uo pipefail
ulimit -c 0 2>/dev/null || true  # a step aborted at its limit writes its stacks, not a core of a CUDA process
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-gpu-out}}"
DEVICE="${GPU_CHECK_DEVICE:-cuda}"
BUDGET="${GPU_CHECK_BUDGET:-360}"
case "$BUDGET" in
    ''|*[!0-9]*) echo "gpu_check.sh: GPU_CHECK_BUDGET=$BUDGET is not a whole number of seconds; give one, e.g. 360" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
WORK="$(mktemp -d)/gpu-check"
mkdir -p "$WORK"
exec > >(tee "$OUT/summary.txt") 2>&1
export PYTHONUNBUFFERED=1                 # a step killed at its limit keeps what it printed
export PYTHONFAULTHANDLER=1
START=$(date +%s)
status=0
# the interpreter that holds torch: $PYTHON, else python3 (some images have no plain `python`)
PY="${PYTHON:-$(command -v python3 || command -v python)}"
pack() {  # the tarball is replaced whole, never left half-written
    tar czf "$OUT/.gpu-check.tar.gz.part" -C "$(dirname "$WORK")" gpu-check \
        && mv -f "$OUT/.gpu-check.tar.gz.part" "$OUT/gpu-check.tar.gz"
}
step() {  # step NAME SECONDS COMMAND...: run, log to WORK/NAME.txt, pack; returns the exit code
    local name=$1 limit=$2
    shift 2
    local at=$(( $(date +%s) - START ))
    if [ $(( at + limit )) -gt "$BUDGET" ]; then
        echo "== $name: skipped at $at s (its limit of $limit s would pass the budget of $BUDGET s)"
        status=1
        return 1
    fi
    echo "== $name (at $at s, limit ${limit} s)"
    timeout -s ABRT -k 5 "$limit" "$@" > "$WORK/$name.txt" 2>&1
    local rc=$?
    tail -n 25 "$WORK/$name.txt"
    echo "== $name: exit $rc"
    [ "$rc" = 0 ] || status=1
    pack
    return $rc
}
# pytest: each test's name as it starts, and the stack of one that hangs for a minute
PYTEST=("$PY" -m pytest -p no:cacheprovider -o faulthandler_timeout=60)

nvidia-smi > "$WORK/nvidia-smi.txt" 2>&1 || echo "no nvidia-smi" > "$WORK/nvidia-smi.txt"
"$PY" -c "import torch, pytest, tabulate, pynvml; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else '', 'pytest', pytest.__version__)" 2>&1 | tee "$WORK/versions.txt"
if [ "$DEVICE" = cpu ]; then  # a dry run: this tree first on the path, nothing installed
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    echo "== install: skipped in a dry run (this tree is first on PYTHONPATH)"
else
    before=$status
    step install 40 "$PY" -m pip install -q --no-deps --no-build-isolation --no-index --disable-pip-version-check -e .
    # without network a failed build (setuptools without `wheel`, say) must not cost the run:
    # register the plugin from the source tree instead, as an install would
    if ! "$PY" scripts/install_from_source.py --check > /dev/null 2>&1; then
        step install-from-source 10 "$PY" scripts/install_from_source.py
    fi
    step install-check 10 "$PY" scripts/install_from_source.py --check && status=$before  # installed: a pip failure is no failure
fi
step probe 40 "$PY" scripts/gpu_probe.py --device "$DEVICE"
step cuda-tests 140 "${PYTEST[@]}" -v -rA -m cuda tests --junitxml="$WORK/cuda-tests.xml"
step record-traces 75 "$PY" scripts/record_gpu_traces.py --device "$DEVICE" "$WORK/fixtures"
step gpu-example 25 "${PYTEST[@]}" -v --opprof conftest_examples/05_gpu_only \
    --opprof-json="$WORK/gpu-example.json" --opprof-trace-dir="$WORK/gpu-example-traces" --opprof-trace=all
step observer 40 "$PY" bench/observer.py --device "$DEVICE" --runs 5
step capture-speed 45 "$PY" bench/bench_analysis.py --device "$DEVICE" --capture-events 30000 --trace-events 50000 --repeat 2
# last: the examples are CPU models; this shows them on the GPU machine's torch
step examples 75 "${PYTEST[@]}" -q --opprof conftest_examples --ignore=conftest_examples/05_gpu_only \
    --opprof-json="$WORK/examples.json" --opprof-html="$WORK/examples.html" --opprof-csv="$WORK/examples.csv" \
    --opprof-trace-dir="$WORK/example-traces" --opprof-trace=all
echo "== done in $(( $(date +%s) - START )) s; exit $status; everything in $OUT/gpu-check.tar.gz"
pack
exec >&- 2>&-
wait  # for tee: the last lines reach summary.txt before the script ends
exit $status
