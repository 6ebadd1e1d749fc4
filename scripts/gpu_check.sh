#!/usr/bin/env bash
# The one prepared run for a GPU machine (no network, a few minutes of device time):
#   bash scripts/gpu_check.sh [OUT]          (OUT defaults to $OUT, else ./gpu-out)
# 1. install the project without network; 2. the cuda-marked tests; 3. the example suite
# measured on the GPU (JSON, HTML, traces); 4. the GPU benches (observer effect, capture speed);
# 5. small recorded traces for tests/data/ with torch's own key_averages() figures.
# Every step has its own timeout and the script goes on after a failure: whatever ran is in OUT.
# Budget: under 8 minutes on an H200 (each step's timeout below; they sum to 7.5 minutes).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-gpu-out}}"
mkdir -p "$OUT"
START=$(date +%s)
status=0
step() {  # step NAME SECONDS COMMAND...: run, log to OUT/NAME.txt, keep the exit code
    local name=$1 limit=$2
    shift 2
    echo "== $name (at $(( $(date +%s) - START )) s, limit ${limit} s)"
    timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
    local rc=$?
    tail -n 25 "$OUT/$name.txt"
    echo "== $name: exit $rc"
    [ "$rc" = 0 ] || status=1
}

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || echo "no nvidia-smi" > "$OUT/nvidia-smi.txt"
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else '')" > "$OUT/torch.txt" 2>&1
step install 45 python -m pip install -q --no-deps --no-build-isolation -e .
step cuda-tests 140 python -m pytest -p no:cacheprovider -q -rA -m cuda tests --junitxml="$OUT/cuda-tests.xml"
step examples 100 python -m pytest -p no:cacheprovider -q --opprof conftest_examples \
    --opprof-json="$OUT/examples.json" --opprof-html="$OUT/examples.html" --opprof-csv="$OUT/examples.csv" \
    --opprof-trace-dir="$OUT/example-traces" --opprof-trace=all
step observer 40 python bench/observer.py --device cuda --runs 5
step capture-speed 55 python bench/bench_analysis.py --device cuda --capture-events 100000 --trace-events 50000 --repeat 3
step record-traces 70 python scripts/record_gpu_traces.py "$OUT/fixtures"
echo "== done in $(( $(date +%s) - START )) s; exit $status; files in $OUT"
exit $status
