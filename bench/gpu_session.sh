#!/usr/bin/env bash
# One device call for a lent GPU: bench/gpu.py's timing table, then the `gpu` test tier.
#
# Here (CPU machine with the test extra):   python bench/gpu.py plan .gpu-plan
#   (plans the benchmark's kernels and, in .gpu-plan/tier, every differential case; add
#   --variant SUFFIX:VAR=VALUE@KERNEL+KERNEL to time a knob's A/B in the same call, as
#   bench/results/README.md's next-run command does)
# Device call: carry [".gpu-plan"], timeout_s 480, command:   bash bench/gpu_session.sh .gpu-plan
#
# Logs go to $OUT (the device tool brings them back): gpu-bench.log/.json, bench.log, tier.log.
# The tier runs in 4 xdist workers with a 30 s limit a case: a kernel that hangs takes its
# worker down (xdist names it and starts another) instead of the whole call.  Both summaries
# are printed last.
set -u
PLAN=${1:-.gpu-plan}
OUT=${OUT:-$PLAN}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TILEIRAS_SERVER=0
nvidia-smi -L 2>/dev/null || true
git log --oneline -1 2>/dev/null || true
timeout "${BENCH_S:-240}" python3 bench/gpu.py run "$PLAN" --budget-s "${BUDGET_S:-180}" --log-dir "$OUT" \
    > "$OUT/bench.log" 2>&1
echo "bench rc=$?"
if [ -f "$PLAN/tier/manifest.json" ]; then
    LIMIT=""
    python3 -c "import pytest_timeout" 2>/dev/null && LIMIT="--timeout=30 --timeout-method=thread"
    # shellcheck disable=SC2086
    TILEIRAS_GPU_PLAN="$PLAN/tier" timeout "${TIER_S:-200}" python3 -m pytest -q -m gpu test/test_gpu_tier.py \
        -p no:cacheprovider -rfE -n 4 $LIMIT > "$OUT/tier.log" 2>&1
    echo "tier rc=$?"
    grep -E "^(FAILED|ERROR)|crashed|[0-9]+ (passed|failed|skipped)" "$OUT/tier.log" | tail -30
fi
tail -18 "$OUT/bench.log"
