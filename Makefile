# Set-up and the two entry points of the README. Every target creates or reuses .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
WORKDIR ?= workdirs/quick

.PHONY: venv demo test lint bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) experiments/train.py --config=configs/hyperteacher.py:quick --workdir=$(WORKDIR)

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/pytest -n 2 tests

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	$(PY) benchmarks/throughput.py

clean:
	rm -rf $(VENV) workdirs
