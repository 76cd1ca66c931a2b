# crowdzoo — every target creates .venv on first use (torch CPU build first, then the package).
PY      := .venv/bin/python
VENV    := .venv/.installed

.PHONY: demo test test-slow bench lint clean

$(VENV): pyproject.toml
	test -d .venv || python3 -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q torch==2.13.0
	.venv/bin/pip install -q -e ".[dev]"
	touch $(VENV)

demo: $(VENV)
	.venv/bin/crowdzoo demo --out runs/demo

test: $(VENV)
	$(PY) -m pytest -q -x

test-slow: $(VENV)
	$(PY) -m pytest -q -m slow

bench: $(VENV)
	$(PY) benchmarks/bench_gppl.py --out docs/benchmarks.md
	$(PY) benchmarks/bench_crowd.py --out docs/benchmarks.md
	$(PY) benchmarks/bench_collab.py --out docs/benchmarks.md

lint: $(VENV)
	.venv/bin/ruff check crowdzoo tests benchmarks

clean:
	rm -rf .venv runs build *.egg-info
