# make        : install missing Debian packages, build, and make .venv whose python imports tripy
#               and whose bin/ has tripy-run
# make demo   : the above, then run examples/quickstart.py
# make test   : the above, then the build-dependency guard and every test (ctest, then pytest)
# make install PREFIX=DIR : the C++ runtime package (header, library, CMake config) into DIR
# make docs   : the documentation site (Sphinx) into $(BUILD)/docs, every code block run
# make bench  : CPU benchmarks against numpy, and the models against Debian's torch (installed)
# make test-gpu: build and run everything on a GPU machine (see scripts/gpu_check.sh)
# Each step prints one line; its output goes to $(BUILD)/setup.log (the tail is shown on failure).
PY ?= /usr/bin/python3
BUILD ?= build
VENV ?= .venv
CMAKE_ARGS ?=
PREFIX ?= $(CURDIR)/$(BUILD)/install
export TRIPY_LOG ?= $(CURDIR)/$(BUILD)/setup.log
STEP = bash scripts/step.sh

.PHONY: all deps build venv demo test check-deps test-cpp test-py install docs bench test-gpu clean

all: build venv

deps:
	@bash scripts/install_deps.sh

build: deps
	@$(STEP) "configuring ($(BUILD))" -- cmake -S . -B $(BUILD) -G Ninja -DPython_EXECUTABLE=$(PY) $(CMAKE_ARGS)
	@$(STEP) "building $$(ninja -C $(BUILD) -t commands | wc -l) targets (up-to-date ones are skipped)" -- cmake --build $(BUILD)

venv: build
	@test -x $(VENV)/bin/python || $(STEP) "making $(VENV)" -- $(PY) -m venv --system-site-packages $(VENV)
	@echo "$(CURDIR)/python" > "$$($(VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/tripy.pth"
	@ln -sf "$(CURDIR)/$(BUILD)/core/tripy-run" $(VENV)/bin/tripy-run

demo: all
	$(VENV)/bin/python examples/quickstart.py

test: all check-deps test-cpp test-py

check-deps:
	@$(STEP) "checking that the set-up installs every Debian package the build uses" \
	  --summary '^check_build_deps' -- bash scripts/check_build_deps.sh $(BUILD)

test-cpp:
	@$(STEP) "testing: C++ (ctest)" --summary 'tests passed' -- ctest --test-dir $(BUILD) --output-on-failure -j2

test-py:
	@$(STEP) "testing: Python (pytest)" --summary ' (passed|failed)' -- $(VENV)/bin/python -m pytest -q -rfE tests

install: build
	@$(STEP) "installing the C++ runtime into $(PREFIX)" -- cmake --install $(BUILD) --prefix "$(PREFIX)" --component runtime

docs: all
	@bash scripts/install_deps.sh scripts/debian-packages-docs.txt
	@$(STEP) "building the documentation site ($(BUILD)/docs/index.html)" -- \
	  $(VENV)/bin/python -m sphinx -W --keep-going -q -b html docs $(BUILD)/docs

bench: all
	@bash scripts/install_deps.sh scripts/debian-packages-bench.txt
	env -u OPENBLAS_CORETYPE $(VENV)/bin/python bench/cpu_bench.py
	env -u OPENBLAS_CORETYPE $(VENV)/bin/python bench/models.py --device cpu

test-gpu:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(BUILD) $(VENV) python/tripy/_C*.so
