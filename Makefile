# Two entry points that work on a fresh machine (needs only python3 >= 3.10 with venv):
#   make book   install into .venv, run every notebook (smoke profile; the GPU-result pages from the
#               committed results store, nothing trained or measured), build _build/html
#   make test   install into .venv, run the test suite
# The install runs once and again whenever pyproject.toml changes (stamp file in .venv).

PYTHON  ?= python3
VENV    ?= .venv
PROFILE ?= smoke
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.vixnb-installed

.PHONY: all book test install clean
all: book

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -e '.[book,test]'
	@touch $@

book: $(STAMP)
	$(VENV)/bin/vixnb book --profile $(PROFILE)

test: $(STAMP)
	$(PY) -m pytest

clean:
	rm -rf _build book/executed
