#!/usr/bin/env bash
# The GEMM's GPU session in one call (logs under $OUT, each benchmark's current file
# <benchmark>-<machine>.md under $OUT/results): the machine, a parallel compile of the variants
# (fills tirx's cache), the benchmark, Nsight Compute on chosen variants.
#   OUT=out VARIANTS=tirx,NAME,... SIZES=4096,8192 DTYPES=float16 SOURCES=DIR NCU="tirx NAME" \
#     REPS=9 PYTEST=1 bash benchmarks/gemm_gpu.sh
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
VARIANTS=${VARIANTS:-tirx}
SIZES=${SIZES:-4096,8192}
DTYPES=${DTYPES:-float16,bfloat16}
{
  date -u +"%Y-%m-%d %H:%M:%S UTC"; pwd
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
  python3 -c "from tirx.backend.cuda.nvrtc import nvrtc_version; print('nvrtc', nvrtc_version())"
} 2>&1 | tee "$OUT/env.txt"
t0=$(date +%s)
python3 benchmarks/gemm_sources.py --out /tmp/gemm-warm/this --variants "$VARIANTS" \
  --sizes "$SIZES" --dtypes "$DTYPES" --jobs 14 > "$OUT/warm.log" 2>&1 || tail -20 "$OUT/warm.log"
echo "compiled in $(( $(date +%s) - t0 )) s"
if [ "${PYTEST:-0}" = 1 ]; then
  python3 -m pytest -q -o addopts="" -m gpu -p no:cacheprovider -rfE tests/test_gemm_pipelined.py \
    2>&1 | tee "$OUT/pytest_gpu.log" | tail -3
fi
rest=${VARIANTS#tirx}; rest=${rest#,}
# the SM clock and power while the benchmark runs (read-only queries)
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu \
  --format=csv,noheader -lms 250 > "$OUT/clocks.csv" 2>&1 &
smi=$!
python3 benchmarks/gemm_speed.py --sizes "$SIZES" --dtypes "$DTYPES" --reps "${REPS:-9}" \
  ${rest:+--variants "$rest"} ${SOURCES:+--sources "$SOURCES"} --results-dir "$OUT/results" \
  > "$OUT/gemm_speed.log" 2>&1 || tail -30 "$OUT/gemm_speed.log"
grep -E "^(mma|float16|bfloat16) " "$OUT/gemm_speed.log"
echo "benchmark done at $(( $(date +%s) - t0 )) s"
if [ -n "${FIXED:-}" ]; then
  python3 benchmarks/gemm_fixed_cost.py --variants "$FIXED" --results-dir "$OUT/results" 2>&1 \
    | tee "$OUT/fixed_cost.txt"
fi
kill $smi 2>/dev/null
if [ -n "${CLOCKS:-}" ]; then
  python3 benchmarks/gemm_clocks.py --variants "$CLOCKS" --results-dir "$OUT/results" 2>&1 \
    | tee "$OUT/clocks.txt"
fi
awk -F', ' '{split($2,a," "); n++; s+=a[1]; if (a[1]<lo||lo=="") lo=a[1]; if (a[1]>hi) hi=a[1]} END {print "SM clock MHz while timing: mean", s/n, "min", lo, "max", hi, "samples", n}' "$OUT/clocks.csv"
for name in ${NCU:-}; do
  ncu --clock-control none -k regex:gemm --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats \
    --section InstructionStats --section Occupancy --section SourceCounters --print-details all \
    python3 benchmarks/gemm_profile.py "$name" 4096 > "$OUT/ncu-$name.txt" 2>&1
  grep -E "SM Frequency|Duration|Compute \(SM\) Throughput|Issue Slots Busy|Warp Cycles Per Issued|Stall|stall" "$OUT/ncu-$name.txt" | head -40
done
echo "all done at $(( $(date +%s) - t0 )) s"
