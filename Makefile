# make        : install missing Debian packages, build, and make .venv whose python imports tripy
# make demo   : the above, then run examples/quickstart.py
# make test   : the above, then every test (ctest, then pytest)
# make bench  : CPU benchmarks against numpy
# make test-gpu: build and run everything on a GPU machine (see scripts/gpu_check.sh)
PY ?= /usr/bin/python3
BUILD ?= build
VENV ?= .venv
CMAKE_ARGS ?=

.PHONY: all deps build venv demo test test-cpp test-py bench test-gpu clean

all: build venv

deps:
	@bash scripts/install_deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DPython_EXECUTABLE=$(PY) $(CMAKE_ARGS) > /dev/null
	@cmake --build $(BUILD)

venv: build
	@test -x $(VENV)/bin/python || $(PY) -m venv --system-site-packages $(VENV)
	@echo "$(CURDIR)/python" > "$$($(VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/tripy.pth"

demo: all
	$(VENV)/bin/python examples/quickstart.py

test: all test-cpp test-py

test-cpp:
	cd $(BUILD) && ctest --output-on-failure -j2

test-py:
	$(VENV)/bin/python -m pytest -q tests

bench: all
	$(VENV)/bin/python bench/cpu_bench.py

test-gpu:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(BUILD) $(VENV) python/tripy/_C*.so
