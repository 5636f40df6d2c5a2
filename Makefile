PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test check bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# A strict editable install: the venv sees the package through a folder of links to the sources,
# which type checkers follow (mypy cannot see through setuptools' default import hook). A module
# added or removed changes its folder, and the install is redone.
EDITABLE := --config-settings editable_mode=strict
PACKAGE_DIRS := luma $(filter-out %/__pycache__/,$(wildcard luma/*/)) grammar
INSTALL := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install --quiet

$(STAMP): $(BIN)/python pyproject.toml Makefile $(PACKAGE_DIRS)
	$(INSTALL) -e . $(EDITABLE)
	touch $(STAMP)

$(TEST_STAMP): $(BIN)/python pyproject.toml Makefile $(PACKAGE_DIRS)
	$(INSTALL) -e '.[test]' $(EDITABLE)
	touch $(STAMP) $(TEST_STAMP)

run: $(STAMP)
	$(BIN)/luma examples/quickstart.luma --tool-module examples/quickstart_tools.py

test: $(TEST_STAMP)
	$(BIN)/python -m pytest

check: $(STAMP)
	$(BIN)/luma check examples --exclude examples/cookbook/broken

bench: $(STAMP)
	$(BIN)/python bench/check_startup.py
	$(BIN)/python bench/check_throughput.py
	$(BIN)/python bench/tool_pipeline.py
	$(BIN)/python bench/lsp_diagnostics.py

clean:
	rm -rf $(VENV) build *.egg-info

.PHONY: bench-native
bench-native: $(STAMP)
	$(BIN)/python bench/native_tool_loop.py

# luma check on 1k-80k declarations and long strings, from a wheel venv it builds, beside
# baml-cli check where baml-py installs (bench/.venv-baml)
.PHONY: bench-scaling
bench-scaling: $(STAMP)
	$(BIN)/python bench/check_scaling.py
