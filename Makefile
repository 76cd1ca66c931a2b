# crowdzoo — every target creates .venv on first use (torch CPU build first, then the package).
PY      := .venv/bin/python
VENV    := .venv/.installed

.PHONY: demo test test-slow bench bench-peers lint docs notebooks chromium clean

$(VENV): pyproject.toml
	test -d .venv || python3 -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q torch==2.13.0
	.venv/bin/pip install -q -e ".[dev]"
	touch $(VENV)

demo: $(VENV)
	.venv/bin/crowdzoo demo --out runs/demo

# two pytest-xdist workers, one per CI core, each test file on one worker (its fixtures fitted once)
test: $(VENV)
	$(PY) -m pytest -q -x -n 2 --dist loadfile

test-slow: $(VENV) chromium
	$(PY) -m pytest -q -m slow

# Debian's chromium for the report's rendering test (needs root and the package mirror)
chromium:
	command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium)

docs: $(VENV)
	.venv/bin/mkdocs build --strict

# after editing a notebook's .py, refresh its .ipynb
notebooks: $(VENV)
	.venv/bin/jupytext --sync docs/notebooks/*.py

bench: $(VENV)
	$(PY) benchmarks/bench_gppl.py --out docs/benchmarks.md
	$(PY) benchmarks/bench_crowd.py --out docs/benchmarks.md
	$(PY) benchmarks/bench_collab.py --out docs/benchmarks.md
	$(PY) benchmarks/bench_dpm.py --out docs/benchmarks.md
	$(PY) benchmarks/bench_scdc.py --out docs/benchmarks.md
	$(PY) benchmarks/bench_overhead.py --out docs/benchmarks.md
	$(PY) benchmarks/bench_distributed.py --out docs/benchmarks.md
	$(PY) benchmarks/bench_distributed_scdc.py --out docs/benchmarks.md
	$(PY) benchmarks/bench_learn_batches.py --out docs/learn-kernel-batches.md
	$(PY) benchmarks/bench_scale.py --out docs/benchmarks.md
	$(PY) benchmarks/bench_pooled_lengthscales.py --out docs/benchmarks.md
	$(PY) benchmarks/bench_active.py --out docs/benchmarks.md

# crowdzoo beside BoTorch, choix and crowd-kit, and its tie model beside evalica, each method in its own
# process; the peers live in their own .venv-peers (never dependencies of crowdzoo). Writes their two
# sections of docs/benchmarks.md.
PEERS   := .venv-peers/.installed

$(PEERS): Makefile
	test -d .venv-peers || python3 -m venv .venv-peers
	.venv-peers/bin/pip install -q --upgrade pip
	.venv-peers/bin/pip install -q torch==2.13.0
	.venv-peers/bin/pip install -q botorch choix crowd-kit evalica==0.4.2 numpy scipy pandas
	touch $(PEERS)

bench-peers: $(VENV) $(PEERS)
	$(PY) benchmarks/peers/run_peers.py --out docs/benchmarks.md
	$(PY) benchmarks/peers/run_ties.py --out docs/benchmarks.md

lint: $(VENV)
	.venv/bin/ruff check crowdzoo tests benchmarks

clean:
	rm -rf .venv runs build *.egg-info
