# Everyday commands. Each creates ./.venv on first use and installs what it needs
# from this repository's own files, so they work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=25.1"

# the package with every backend, plus the dev tools of [dependency-groups] dev and
# what the benchmarks compare against (their tests run in the suite)
$(VENV)/.dev-installed: pyproject.toml benchmarks/requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --group dev -e ".[all]" -r benchmarks/requirements.txt
	touch $@

# the offline demo on the embedded default (SQLite file), no server, no API key
demo: | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[sqlite]"
	$(BIN)/python -m langgraph_stm demo

# the whole test suite (PostgreSQL tests use STM_TEST_POSTGRES_URI, default 127.0.0.1:5432)
test: $(VENV)/.dev-installed
	$(BIN)/python -m pytest

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check langgraph_stm tests benchmarks
	$(BIN)/ruff format --check langgraph_stm tests benchmarks

typecheck: $(VENV)/.dev-installed
	$(BIN)/mypy

# the documentation site (mkdocs.yml: docs/ and the API reference from the docstrings),
# every warning an error
docs: $(VENV)/.dev-installed
	$(BIN)/mkdocs build --strict --site-dir site

bench: $(VENV)/.dev-installed
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis site stm-demo.sqlite*
