# moec: the two commands of the README, and their parts.
#   make run   - set up, build, emit every built-in op for every target into out/, print a table
#   make test  - set up, build, run every test (GoogleTest + lit, through ctest)
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?= -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22

.PHONY: all setup configure build run test bench clean

all: build

setup:
	bash scripts/setup.sh

configure: setup
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) > $(BUILD).configure.log || (cat $(BUILD).configure.log; exit 1)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/bin/moec emit-all --examples ops/examples.json --out-dir out

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

bench: build
	MOEC_CACHE_DIR=$(BUILD)/bench-cache/default $(BUILD)/bin/moec-bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

clean:
	rm -rf $(BUILD) $(BUILD).configure.log out
