# The README's two commands: `make run` and `make test`. Each creates .venv and installs what it needs first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
# Wide enough for the layer table when the output is not a terminal.
export COLUMNS ?= 120

.PHONY: run test lint typecheck bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

run: $(STAMP)
	$(BIN)/layerscope estimate "$$($(BIN)/python -m layerscope.samples)" --target rdk-s100 --top 15 --json out/run.json

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/python -m pytest -q

bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) out .mypy_cache .pytest_cache .ruff_cache benchmarks/.cache
