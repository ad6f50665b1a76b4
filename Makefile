# make        : install missing Debian packages, build, and make .venv whose python imports tripy
#               and whose bin/ has tripy-run and tripy-compile
# make demo   : the above, then run examples/quickstart.py
# make test   : the above, then the build-dependency guard and every test (ctest, then pytest)
# make install PREFIX=DIR : the C++ runtime package (header, library, CMake config) into DIR
# make docs   : the documentation site (Sphinx) into $(BUILD)/docs, every code block run
# make bench  : CPU benchmarks against numpy, and the models against Debian's torch (installed)
# make test-gpu: build and run everything on a GPU machine (see scripts/gpu_check.sh)
# make fuzz   : libFuzzer (clang) on the executable loader, the .npy reader, the FlatIR parser, the
#               safetensors reader and the ONNX reader, FUZZ_SECONDS each (build-fuzz/; crashes land in build-fuzz/crashes/)
# make test-asan: ASan+UBSan build (build-asan/): ctest, then pytest through the instrumented module
# make test-tsan: TSan build (build-tsan/): the concurrency tests, C++ and Python
# Each step prints one line; its output goes to $(BUILD)/setup.log (the tail is shown on failure).
PY ?= /usr/bin/python3
BUILD ?= build
VENV ?= .venv
CMAKE_ARGS ?=
PREFIX ?= $(CURDIR)/$(BUILD)/install
export TRIPY_LOG ?= $(CURDIR)/$(BUILD)/setup.log
STEP = bash scripts/step.sh

.PHONY: all deps build venv demo test check-deps test-cpp test-py install docs bench test-gpu fuzz test-asan test-tsan clean

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
	@printf '#!/bin/sh\nexec "%s/bin/python" -m tripy.onnx "$$@"\n' "$$(cd $(VENV) && pwd)" > $(VENV)/bin/tripy-compile
	@chmod +x $(VENV)/bin/tripy-compile

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
	env -u OPENBLAS_CORETYPE $(VENV)/bin/python bench/llm.py --device cpu
	env -u OPENBLAS_CORETYPE $(VENV)/bin/python bench/onnx.py --device cpu

test-gpu:
	bash scripts/gpu_check.sh

FUZZ_SECONDS ?= 60
FUZZERS = npy executable flat_ir safetensors onnx
# Only what the harnesses link is built: no tests, no Python module, no CUDA backend.
fuzz: deps
	@bash scripts/install_deps.sh scripts/debian-packages-fuzz.txt
	@$(STEP) "configuring (build-fuzz: clang, libFuzzer, ASan + UBSan)" -- cmake -S . -B build-fuzz -G Ninja \
	  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRIPY_BUILD_FUZZERS=ON \
	  -DTRIPY_BUILD_TESTS=OFF -DTRIPY_BUILD_PYTHON=OFF -DTRIPY_WITH_CUDA=OFF \
	  "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
	@$(STEP) "building the fuzzers" -- cmake --build build-fuzz --target $(addprefix fuzz_,$(FUZZERS))
	@for f in $(FUZZERS); do $(STEP) "fuzzing $$f for $(FUZZ_SECONDS) s" --summary '^fuzz ' -- \
	  bash scripts/fuzz.sh build-fuzz $$f $(FUZZ_SECONDS) || exit 1; done

# Sanitizer builds: their own build dirs, only the targets the tests need, ccache as usual.
SAN_TARGETS = tripy_runtime_tests tripy_compiler_tests tripy_runtime_only_test tripy-run _C \
  $(addsuffix _standalone,$(addprefix fuzz_,$(FUZZERS)))
test-asan: deps
	@$(STEP) "configuring (build-asan: ASan + UBSan)" -- cmake -S . -B build-asan -G Ninja -DPython_EXECUTABLE=$(PY) \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRIPY_PYTHON_MODULE_DIR=$(CURDIR)/build-asan/python/tripy \
	  "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
	@$(STEP) "building the instrumented tests and module" -- cmake --build build-asan --target $(SAN_TARGETS)
	@$(STEP) "testing under ASan + UBSan: C++ (ctest)" --summary 'tests passed' -- bash scripts/sanitize.sh asan ctest
	@$(STEP) "testing under ASan + UBSan: Python (pytest)" --summary ' (passed|failed)' -- bash scripts/sanitize.sh asan pytest

test-tsan: deps
	@$(STEP) "configuring (build-tsan: TSan)" -- cmake -S . -B build-tsan -G Ninja -DPython_EXECUTABLE=$(PY) \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRIPY_PYTHON_MODULE_DIR=$(CURDIR)/build-tsan/python/tripy \
	  "-DCMAKE_CXX_FLAGS=-fsanitize=thread -fno-omit-frame-pointer"
	@$(STEP) "building the instrumented tests and module" -- cmake --build build-tsan --target tripy_runtime_tests tripy_compiler_tests _C
	@$(STEP) "testing under TSan: C++ concurrency tests" --summary 'tests passed' -- bash scripts/sanitize.sh tsan ctest
	@$(STEP) "testing under TSan: Python concurrency tests" --summary ' (passed|failed)' -- bash scripts/sanitize.sh tsan pytest

clean:
	rm -rf $(BUILD) build-fuzz build-asan build-tsan $(VENV) python/tripy/_C*.so
