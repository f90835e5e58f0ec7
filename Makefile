# Developer shortcuts; the README's two commands work without make.
PY ?= .venv/bin/python

.PHONY: setup demo test test-gpu lint format bench clean lab notebooks names wheel

setup:
	python3 -m venv .venv
	.venv/bin/pip install -q torch==2.13.0 -e '.[test,sass,notebook]'

demo:
	$(PY) -m tirx.demo

test:
	$(PY) -m pytest -q

test-gpu:  # on a machine with an NVIDIA GPU
	$(PY) -m pytest -q -m gpu

# A wheel of this checkout in dist/ (the launcher's C extension built where a compiler is
# found); .ci/run installs one into a fresh venv and tests it from outside the checkout.
wheel:
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w dist .

lint:
	$(PY) -m ruff check tirx widgets tests benchmarks
	$(PY) -m ruff format --check tirx widgets tests benchmarks

format:
	$(PY) -m ruff format tirx widgets tests benchmarks
	$(PY) -m ruff check --fix tirx widgets tests benchmarks

# The benchmarks that make sense without a GPU (compile speed, the launch path's Python cost
# with the launch stubbed, its parts, the simulator). Each rewrites its current file,
# $(RESULTS)/<benchmark>-<machine>.md (compile-cpu.md, launch-cpu-stub.md, launch_parts-cpu.md,
# sim_speed-cpu.md on a machine without a GPU). The GPU ones: benchmarks/run_gpu.sh.
RESULTS ?= benchmarks/results
bench:
	$(PY) benchmarks/compile.py --results-dir $(RESULTS)
	$(PY) benchmarks/launch.py --results-dir $(RESULTS)
	$(PY) benchmarks/launch_parts.py --results-dir $(RESULTS)
	$(PY) benchmarks/sim_speed.py --results-dir $(RESULTS)

# JupyterLab on the tutorials; kernels use the GPU when visible (TIRX_TARGET as you set it).
# More options: make lab LAB_ARGS="--no-browser --port=8899"; as root, --allow-root is added.
LAB_ARGS ?=
lab:
	$(PY) -m jupyter lab --ServerApp.root_dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

notebooks:  # re-execute the tutorials in place from clean kernels (the committed outputs)
	$(PY) -m jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=600 --ExecutePreprocessor.store_widget_state=False --ExecutePreprocessor.record_timing=False \
		notebooks/[0-9][0-9]_*.ipynb notebooks/visualizer_demo.ipynb
	$(PY) -c "$$STATIC_VIEWS" notebooks/visualizer_demo.ipynb
	$(PY) -c "$$RELATIVE_PATHS" notebooks/*.ipynb

# The demo's saved views keep their static output only (text, sanitize-proof HTML, PNG: what
# GitHub, nbviewer and an untrusted JupyterLab show); each view's live output, its widget, is
# left out: without its kernel JupyterLab would say "model not found". Running the notebook
# brings the widgets back.
define STATIC_VIEWS
import sys, nbformat
WIDGET = "application/vnd.jupyter.widget-view+json"
nb = nbformat.read(sys.argv[1], as_version=4)
for cell in nb.cells:
    kept = []
    for out in cell.get("outputs", []):
        data = out.get("data")
        if data is not None:
            data.pop(WIDGET, None)
            if not any(data.values()):  # a view's live output: nothing else in it
                continue
        kept.append(out)
    if cell.cell_type == "code":
        cell.outputs = kept
nbformat.write(nb, sys.argv[1])
endef
export STATIC_VIEWS

# Outputs name files of this checkout relative to it, not by where it lies on the machine that ran
# them (NVRTC's PTX, for one, names its sources by absolute path): the notebooks folder's path
# and the repository's are taken out of every saved output.
define RELATIVE_PATHS
import os, sys, nbformat
root = os.getcwd()
prefixes = [os.path.join(root, "notebooks") + os.sep, root + os.sep]
def relative(text):
    for prefix in prefixes:
        text = text.replace(prefix, "")
    return text
for path in sys.argv[1:]:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if isinstance(out.get("text"), str):
                out["text"] = relative(out["text"])
            data = out.get("data", {})
            for kind, value in data.items():
                if isinstance(value, str):
                    data[kind] = relative(value)
    nbformat.write(nb, path)
endef
export RELATIVE_PATHS

# docs/tirx-names.md: every name of the real TIRx's T and T.cuda with its status here, from
# the real package (apache-tvm-tirx==0.1.0a4) in its own venv; run it after names land.
REF_PY ?= .venv-ref/bin/python
names:
	$(REF_PY) docs/name_status.py

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache
