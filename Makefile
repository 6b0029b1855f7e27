# Entry points that work on a fresh machine (needs only python3 >= 3.10 with venv):
#   make book       install into .venv and build the published book (_build/html): every chapter rendered from
#                   the committed results store in PROFILE (budget), nothing trained or measured
#   make check      the same install, then the smoke pipeline check's book: every chapter run on the CPU
#   make test       the same install, then the fast tier of the test suite (pytest -m "not slow"; minutes)
#   make test-all   the same install, then ruff (pyproject.toml's [tool.ruff]) and the whole suite (CI: .ci/run),
#                   naming its 20 slowest tests (CI is to stay under 18 minutes on two cores)
# The install runs once and again whenever pyproject.toml changes (stamp file in .venv).

PYTHON  ?= python3
VENV    ?= .venv
PROFILE ?= budget
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.vixnb-installed

.PHONY: all book check test test-all install clean
all: book

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -e '.[book,test]'
	@touch $@

book: $(STAMP)
	$(VENV)/bin/vixnb book --profile $(PROFILE)

check: $(STAMP)
	$(VENV)/bin/vixnb book --profile smoke

test: $(STAMP)
	$(PY) -m pytest -m "not slow"

test-all: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest --durations=20

clean:
	rm -rf _build book/executed
