# The two commands of the README: `make demo` and `make test`. Both set up everything they need
# (virtual environment in .venv/, Kafka jars via Maven, Debian's redis-server) on a fresh machine.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Reinstall when pyproject.toml changes.
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-16)

.PHONY: install demo test lint unit up down clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=24"
	$(BIN)/pip install --quiet -e ".[dev]"
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

up: install
	$(BIN)/streamrec up
	$(BIN)/streamrec topics create

down: install
	$(BIN)/streamrec down

demo: install
	$(BIN)/streamrec demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy .
	$(BIN)/lint-imports --no-cache

# The test session starts Kafka and Redis itself if nothing answers, and stops what it started.
test: install lint
	$(BIN)/pytest

unit: install
	$(BIN)/pytest tests/unit

clean:
	-$(BIN)/streamrec down
	rm -rf .streamrec
