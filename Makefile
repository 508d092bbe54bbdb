# The two commands of the README: `make demo` and `make test`.
# Each creates .venv (pinned by constraints.txt) on first use and reuses it after.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test env matrix bench soak history

env: $(STAMP)

STUBS := stubs/pyproject.toml $(wildcard stubs/thunder-stubs/*.pyi stubs/thunder-stubs/*/*.pyi)

$(STAMP): pyproject.toml constraints.txt requirements/test.txt $(STUBS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[thunder]' -r requirements/test.txt ./stubs \
	    --config-settings editable_mode=compat
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/safe-tracectx demo

test: $(STAMP)
	$(BIN)/python -m mypy --strict
	$(BIN)/python -m pytest -q

# The tox matrix across torch and lightning-thunder versions (see tox.ini; downloads several GB per env).
matrix: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check 'tox>=4.20'
	$(BIN)/tox

# The benchmarks (~25 min; BENCH_* settings in benchmarks/bench_config.py): ratios side by side with
# their 95% intervals, written to docs/performance.md and docs/overheads.png.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -r requirements/bench.txt
	mkdir -p build
	cd benchmarks && ../$(BIN)/python -m pytest -q -p no:cacheprovider -c /dev/null --rootdir=. \
	    --benchmark-json=../build/bench.json --benchmark-min-rounds=20 .
	$(BIN)/python benchmarks/report.py build/bench.json

# The state machine for 10^6 steps (25,000 examples x 40 steps); prints hypothesis' statistics.
soak: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_state_machine.py --hypothesis-profile=soak --hypothesis-show-statistics

# Thunder's history as the acceptance test (~40 min on 2 cores): every case of history/cases at its fix's parent
# and at the fix (plain, strict, audit), and the ordinary programs at 0.2.1 to main; writes docs/history.md.
# Thunder's packages come from the bundle in ../shared/thunder-history (THUNDER_HISTORY_BUNDLE), cached in build/.
history: $(STAMP)
	$(BIN)/python -m history --all --json build/history.json --markdown docs/history.md
