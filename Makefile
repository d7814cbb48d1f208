# The README's two commands: `make demo` and `make test` (each installs what it needs first).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
OUT    ?= out

.PHONY: install demo test test-fast wheel image test-image lint debian-packages java-helper clean

install: $(VENV)/.installed

# pyserini is installed alone and --no-deps: we only need the Lucene jar it carries, and its
# declared dependencies would pull torch and gigabytes.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,pyterrier,ray,serve,ir_datasets]'
	$(BIN)/pip install -q --no-deps pyserini==0.25.0
	touch $@

# Debian packages some tests need: WordNet's database (wordnet-base) for the synonym option, qemu-user to run
# the encoders on an emulated AVX2-only CPU (tests/test_reproducibility.py), and chromium with its driver for the
# browser test of kueri serve (tests/test_serve.py). Tests skip, saying why, without them.
debian-packages:
	@missing=; \
	[ -f /usr/share/wordnet/data.noun ] || missing="$$missing wordnet-base"; \
	command -v qemu-x86_64 >/dev/null || missing="$$missing qemu-user"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null || missing="$$missing chromium-driver"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  ($$SUDO apt-get update -q && $$SUDO apt-get install -y -q $$missing) >/dev/null \
	    || echo "warning: could not install$$missing; the tests that need them will be skipped"; \
	fi

demo: install
	./my-software.sh -i kueri/resources/sample -o $(OUT)
	$(BIN)/kueri evaluate $(OUT)/run.txt --qrels kueri/resources/qrels/touche-task2-2022-relevance.qrels

# Everything: ruff, then every test (the slow ones build real indexes of the sample, run the default end to end,
# install the wheel into a fresh venv, and build and run the TIRA image: scripts/with_docker.sh starts a Docker
# engine for them where it can, and says why they are skipped where it cannot).
test: install debian-packages
	$(BIN)/ruff check kueri scripts tests benchmarks
	scripts/with_docker.sh $(BIN)/pytest -q -rs --durations=15

# The fast loop: every unit-level test, under 2 minutes on 2 cores (two processes: pyproject.toml's addopts).
test-fast: install
	$(BIN)/pytest -q -m "not slow"

# kueri's Java helper, compiled into the classes the package ships: run after editing kueri/lucene/java/*.java
# (needs a JDK's javac), and commit the classes with the sources.
java-helper: install
	$(BIN)/python scripts/compile_java_helper.py

# A wheel in dist/ (package data included); install it with pip, then pip install --no-deps pyserini==0.25.0.
wheel: install
	$(BIN)/pip wheel --no-deps -q -w dist .

# The TIRA image kueri:latest (Dockerfile): a wheelhouse built here, a Debian 12 base (debootstrap when none can
# be pulled), then docker build. test-image runs it as TIRA does (no network, input read-only) on the sample.
image: install
	scripts/build_image.sh

test-image: install
	scripts/with_docker.sh $(BIN)/pytest -q -rs tests/test_image.py

lint: install
	$(BIN)/ruff check kueri scripts tests benchmarks

clean:
	rm -rf $(VENV) work $(OUT) .pytest_cache build dist
