# The README's two commands: `make demo` and `make test` (each installs what it needs first).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
OUT    ?= out

.PHONY: install demo test lint wordnet clean

install: $(VENV)/.installed

# pyserini is installed alone and --no-deps: we only need the Lucene jar it carries, and its
# declared dependencies would pull torch and gigabytes.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	$(BIN)/pip install -q --no-deps pyserini==0.25.0
	touch $@

# WordNet database files (Debian's wordnet-base) for the synonym option and its test.
wordnet:
	@if [ ! -f /usr/share/wordnet/data.noun ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  ($$SUDO apt-get update -q && $$SUDO apt-get install -y -q wordnet-base) >/dev/null \
	    || echo "warning: could not install wordnet-base; the WordNet test will be skipped"; \
	fi

demo: install
	./my-software.sh -i resources/sample -o $(OUT)
	$(BIN)/kueri evaluate $(OUT)/run.txt --qrels resources/qrels/touche-task2-2022-relevance.qrels

test: install wordnet
	$(BIN)/ruff check kueri scripts tests
	$(BIN)/pytest -q

lint: install
	$(BIN)/ruff check kueri scripts tests

clean:
	rm -rf $(VENV) work $(OUT) .pytest_cache
