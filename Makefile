# One-command setup, run and test. Every target is idempotent: a warm machine only re-checks stamps.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.cosched-installed
PYTHON ?= python3

.PHONY: setup apt venv native run test test-python test-native clean

setup: apt $(STAMP) native

apt:
	@tools/setup-apt.sh

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --no-cache-dir --upgrade pip==26.3 setuptools==84.2.1 wheel==0.48.0

# Re-install only when the dependency pins change. Modules are byte-compiled here, at install: with
# PYTHONDONTWRITEBYTECODE set (as on this machine) nothing compiles them later, and every process would again.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q --no-cache-dir --no-build-isolation -e '.[test]'
	@touch $@

# Builds in parallel on every CPU; the C tests' runs stay one after another (the recipe's lines of native's test).
native:
	@$(MAKE) --no-print-directory -s -j$$(nproc) -C native all

run: setup
	@tools/run-example.sh

test: setup
	@$(MAKE) --no-print-directory test-native
	@$(MAKE) --no-print-directory test-python

test-native:
	@$(MAKE) --no-print-directory -j$$(nproc) -C native test

test-python:
	@tools/test-python.sh

clean:
	@$(MAKE) --no-print-directory -C native clean
	rm -rf $(VENV) *.egg-info
