# moec: the two commands of the README, and their parts.
#   make run   - set up, build, emit every built-in op for every target into out/, print a table, sweep one
#                small autotuning example (out/tune/: its table, tuning file, CSV and plot)
#   make test  - set up, build, run every test (GoogleTest + lit, through ctest)
#   make test-asan - the whole ctest suite built with ASan + UBSan (build-asan, shared with make fuzz)
#   make test-tsan - the runtime's concurrency tests built with TSan (build-tsan)
#   make fuzz  - build the libFuzzer targets (build-asan) and run each for FUZZ_SECONDS on its corpus
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?= -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22

.PHONY: all setup configure build run test bench clean test-asan test-tsan fuzz

all: build

setup:
	bash scripts/setup.sh

configure: setup
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) > $(BUILD).configure.log || (cat $(BUILD).configure.log; exit 1)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The tune example writes its tuning file to out/ (not the cache's tuning folder, which the runtime reads).
run: build
	$(BUILD)/bin/moec emit-all --examples ops/examples.json --out-dir out
	$(BUILD)/bin/moec tune moe_init_routing_v2_grad --target cpu --dtype bf16 --dim H=1024 --attr top_k=8 \
	  --tokens 512 --reps 3 --out out/tune/example.json --report-dir out/tune

# A failure is run once more at the end, so that its output is the last thing printed (CI shows the tail).
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) || { \
	  echo "== the failed tests once more, their output last =="; \
	  ctest --test-dir $(BUILD) --rerun-failed --output-on-failure; exit 1; }

bench: build
	MOEC_CACHE_DIR=$(BUILD)/bench-cache/default $(BUILD)/bin/moec-bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

clean:
	rm -rf $(BUILD) $(BUILD).configure.log out

# Sanitizers. The project's code is instrumented; libLLVM.so/libMLIR.so and the JIT-compiled kernels
# are not. scripts/sanitizers/ holds the options and suppressions.
# One ASan + UBSan build serves the sanitized tests and the fuzzers: configured alike (MOEC_FUZZ=ON, whose
# libraries carry libFuzzer's coverage besides ASan and UBSan), `make fuzz` then `make test-asan` (.ci/run)
# compile the project once, not twice.
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= $(ASAN_BUILD)
SANITIZED_FLAGS := $(CMAKE_FLAGS) -DMOEC_FUZZ=ON
FUZZ_SECONDS ?= 60
SAN_DIR := $(CURDIR)/scripts/sanitizers
# allow_user_poisoning=0: LLVM's headers poison BumpPtrAllocator slabs in instrumented code
# (__asan_poison_memory_region), and the uninstrumented libMLIR.so then allocates from them without
# unpoisoning: false use-after-poison reports in memmove. The project itself poisons nothing.
export ASAN_OPTIONS ?= detect_leaks=1:abort_on_error=1:allow_user_poisoning=0:strict_string_checks=1
export LSAN_OPTIONS ?= suppressions=$(SAN_DIR)/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS ?= suppressions=$(SAN_DIR)/tsan.supp:halt_on_error=1:second_deadlock_stack=1
TSAN_TESTS ?= ^(Runtime|RuntimeHammer|DiskCacheTest|Bundle|ThreadPool|TensorView)\.

# Every kind of test, each parameterized one at the two ends of its parameters (scripts/ctest-kinds.py);
# ASAN_ALL=1 runs every test.
test-asan: setup
	cmake -S . -B $(ASAN_BUILD) $(SANITIZED_FLAGS) > $(ASAN_BUILD).configure.log \
	  || (cat $(ASAN_BUILD).configure.log; exit 1)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	python3 scripts/ctest-kinds.py $(ASAN_BUILD) $(ASAN_BUILD)/kinds.txt
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) $(if $(ASAN_ALL),,-I $(CURDIR)/$(ASAN_BUILD)/kinds.txt)

test-tsan: setup
	cmake -S . -B $(TSAN_BUILD) $(CMAKE_FLAGS) -DMOEC_SANITIZE=thread > $(TSAN_BUILD).configure.log \
	  || (cat $(TSAN_BUILD).configure.log; exit 1)
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target moec_jit_tests moec_cache_tests moec_runtime_tests
	ctest --test-dir $(TSAN_BUILD) --output-on-failure -j $(JOBS) -R '$(TSAN_TESTS)'

fuzz: setup
	cmake -S . -B $(FUZZ_BUILD) $(SANITIZED_FLAGS) > $(FUZZ_BUILD).configure.log \
	  || (cat $(FUZZ_BUILD).configure.log; exit 1)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target moec-fuzzers
	bash fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)
