# One-command setup, run and test. Every target is idempotent: a warm machine only re-checks stamps.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.cosched-installed
PYTHON ?= python3

.PHONY: setup apt venv native native-tests run test test-python test-native clean

# After the Debian packages, the Python environment and the C build side by side (two jobs: pip's install takes
# minutes on a fresh machine, the C build under a minute beside it).
setup: apt
	@$(MAKE) --no-print-directory -s -j2 $(STAMP) native

apt:
	@tools/setup-apt.sh

$(PY):
	@echo "setup: a Python environment in $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --no-cache-dir --upgrade pip==26.3 setuptools==84.2.1 wheel==0.48.0

# Re-install only when the dependency pins change. Modules are byte-compiled here, at install: with
# PYTHONDONTWRITEBYTECODE set (as on this machine) nothing compiles them later, and every process would again.
$(STAMP): pyproject.toml | $(PY)
	@echo "setup: installing the pinned Python packages (two to three minutes the first time)"
	$(PY) -m pip install -q --no-cache-dir --no-build-isolation -e '.[test]'
	@touch $@

native:
	@$(MAKE) --no-print-directory -s -C native all

# The C tests' binaries (plain and sanitized), built during setup by `make test`.
native-tests:
	@$(MAKE) --no-print-directory -s -C native all sanitizers

run: setup
	@tools/run-example.sh

test: apt
	@$(MAKE) --no-print-directory -s -j2 $(STAMP) native-tests
	@$(MAKE) --no-print-directory test-native
	@$(MAKE) --no-print-directory test-python

# Builds what is missing on every CPU; the C tests' runs stay one after another (the lines of native's test recipe).
test-native:
	@$(MAKE) --no-print-directory -j$$(nproc) -C native test

test-python:
	@tools/test-python.sh

clean:
	@$(MAKE) --no-print-directory -C native clean
	rm -rf $(VENV) *.egg-info
