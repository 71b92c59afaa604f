# The README's two commands: `make run` and `make test`. Each creates .venv and installs what it needs first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
DOCS_STAMP := $(VENV)/.installed-docs
# Wide enough for the layer table when the output is not a terminal.
export COLUMNS ?= 120

# The browser tests drive Debian's chromium through Playwright (Playwright's own browser download is not used).
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" -ne 0 ] && command -v sudo >/dev/null && echo sudo)

.PHONY: run test lint typecheck docs bench clean browser

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,docs]'
	touch $(DOCS_STAMP)

# Idempotent: nothing happens when chromium is there; quiet; no prompt (CI runs as root with no stdin).
$(CHROMIUM):
	@echo "installing Debian's chromium for the browser tests (apt-get)"
	@export DEBIAN_FRONTEND=noninteractive; $(SUDO) apt-get update -qq >/dev/null && \
		$(SUDO) apt-get install -y -qq chromium >/dev/null
	@test -x $(CHROMIUM)

browser: $(CHROMIUM)

# The main job: measure every layer of the bundled YOLOv5s on this machine, beside its estimate; write the
# run file and the HTML report.
run: $(STAMP)
	$(BIN)/layerscope profile --runs 20 --warmup 5 --top 15 -o out/run.json --html out/report.html

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# The documentation site (mkdocs.yml, docs/) into out/site; --strict: any warning, such as a link or an anchor that
# does not resolve, fails the build. The variable silences mkdocs-material's banner about its successor.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The Ray tests (marker `ray`) start a Ray cluster: they run in a network namespace of their own with loopback
# alone, so Ray's node address is 127.0.0.1 and no traffic can reach another address.
LOOPBACK_ONLY := unshare -n sh -c 'ip link set lo up && exec "$$@"' sh

test: lint typecheck docs $(CHROMIUM)
	$(BIN)/python -m pytest -q -m "not ray"
	@if unshare -n true 2>/dev/null; then \
		$(LOOPBACK_ONLY) $(BIN)/python -m pytest -q -m ray; \
	else \
		echo "Ray tests skipped: they need a network namespace of their own (unshare -n, as root)"; \
	fi

bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) out .mypy_cache .pytest_cache .ruff_cache benchmarks/.cache
