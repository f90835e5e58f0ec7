# Developer shortcuts; the README's two commands work without make.
PY ?= .venv/bin/python

.PHONY: setup demo test test-gpu lint format bench clean

setup:
	python3 -m venv .venv
	.venv/bin/pip install -q torch==2.13.0 -e '.[test,sass,notebook]'

demo:
	$(PY) -m tirx.demo

test:
	$(PY) -m pytest -q

test-gpu:  # on a machine with an NVIDIA GPU
	$(PY) -m pytest -q -m gpu

lint:
	$(PY) -m ruff check tirx widgets tests benchmarks
	$(PY) -m ruff format --check tirx widgets tests benchmarks

format:
	$(PY) -m ruff format tirx widgets tests benchmarks
	$(PY) -m ruff check --fix tirx widgets tests benchmarks

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache
