#!/usr/bin/env bash
# Everything this project runs on the GPU machine, in one call; logs land in $OUT, and each
# benchmark's current file (benchmarks/results/<benchmark>-<machine>.md) in $OUT/results, to be
# copied over benchmarks/results/ when the run is the one to keep.
#   OUT=gpu-out bash benchmarks/run_gpu.sh        (on a machine with an NVIDIA GPU)
# On a copy of a tree whose git history is not its own, set TIRX_COMMIT to the commit the copy
# is (the results files record it: benchmarks/report.py).
# Python packages the machine lacks (IPython, ipywidgets, nbval, ...) may be carried as
# wheels in .whl/ (see the device tool's notes); they are installed to /tmp/site.
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 \
  || { tail -20 "$OUT/install.log"; exit 1; }
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
{
  date -u +"%Y-%m-%d %H:%M UTC"
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
  python3 -c "import sys, torch, cuda.bindings; print('python', sys.version.split()[0], '| torch', torch.__version__, '| cuda-bindings', cuda.bindings.__version__)"
  python3 -c "from tirx.backend.cuda.nvrtc import nvrtc_version; print('nvrtc', nvrtc_version())"
  python3 -c "from tirx.backend.cuda.executable import _native_module as m; print('C launch extension:', 'built' if m() else 'NOT built (Python runner)')"

} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
python3 -m tirx.demo > "$OUT/demo.log" 2>&1; tail -1 "$OUT/demo.log"
python3 -m pytest -q -m gpu -p no:cacheprovider -rfE $(python3 -c "import xdist" 2>/dev/null && echo "-n 8") \
  tests/ --deselect tests/test_sanitizer_parity.py \
  2>&1 | tee "$OUT/pytest_gpu.log" | tail -3
# the simulator against compute-sanitizer, kernel by kernel (subprocesses: -n 8 where xdist is there)
export PATH=$PATH:/usr/local/cuda/bin
TIRX_PARITY_OUT="$OUT/parity.md" python3 -m pytest -q -m gpu -p no:cacheprovider -rfE \
  $(python3 -c "import xdist" 2>/dev/null && echo "-n 8") tests/test_sanitizer_parity.py 2>&1 \
  | tee "$OUT/pytest_parity.log" | tail -3
# under xdist each worker writes its own table: one file comes back instead of eight (the
# device tool returns at most 8 files)
if ls "$OUT"/parity.gw*.md >/dev/null 2>&1; then
  { head -2 "$(ls "$OUT"/parity.gw*.md | head -1)"
    for f in "$OUT"/parity.gw*.md; do tail -n +3 "$f"; done; } > "$OUT/parity.md"
  rm -f "$OUT"/parity.gw*.md
fi
RES="$OUT/results"
python3 benchmarks/launch.py --results-dir "$RES" > "$OUT/launch.log" 2>&1; tail -13 "$OUT/launch.log"
python3 benchmarks/launch_parts.py --results-dir "$RES" > "$OUT/launch_parts.log" 2>&1; tail -23 "$OUT/launch_parts.log"
python3 benchmarks/compile.py --results-dir "$RES" > "$OUT/compile.log" 2>&1; tail -13 "$OUT/compile.log"
python3 benchmarks/gemm_speed.py --main hopper-out16 \
  --variants hopper,hopper-out16-c2,wgmma-tma,256x128x64-8w-3s-swizzle --fp8 also \
  --results-dir "$RES" > "$OUT/gemm_speed.log" 2>&1; sed -n '/^| dtype/,/^$/p' "$OUT/gemm_speed.log"
python3 benchmarks/softmax_speed.py --dtypes float16,bfloat16 --results-dir "$RES" \
  > "$OUT/softmax_speed.log" 2>&1; tail -9 "$OUT/softmax_speed.log"
python3 benchmarks/softmax_backward_speed.py --dtypes float16,bfloat16 --results-dir "$RES" \
  > "$OUT/softmax_backward_speed.log" 2>&1; tail -9 "$OUT/softmax_backward_speed.log"
python3 benchmarks/attention_speed.py --wgmma-configs 128x2,128x2-pp,128x2-pp-ov,64x3-pp-ov \
  --results-dir "$RES" > "$OUT/attention_speed.log" 2>&1
sed -n '/^| dtype/,/^$/p' "$OUT/attention_speed.log"
python3 benchmarks/fp8_accuracy.py --results-dir "$RES" > "$OUT/fp8_accuracy.log" 2>&1
grep '^|' "$OUT/fp8_accuracy.log"
ls "$RES"
# the tutorials with a GPU visible: target=None picks cuda (nbval options come from pyproject)
python3 -m pytest -q -p no:cacheprovider --durations=10 notebooks/ 2>&1 \
  | tee "$OUT/notebooks_gpu.log" | tail -3
