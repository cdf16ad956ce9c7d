# Thin entry points; the real configuration lives in CMakePresets.json and scripts/.
# Every build uses at most JOBS parallel jobs (the CI machine has 2 cores).

JOBS         ?= 2
DEMO_BIN     ?= build/release/tools/postal
DEMO_ARGS    ?= demo
FUZZ_SECONDS ?= 30
SOAK_MINUTES ?= 30
SOAK_SEED    ?= 1
SOAK_FILE    ?= examples/topologies/soak.toml
FORMAT_DIRS  := wire runtime actors routing mail tools tests benchmarks examples fuzz

# ccache keys on paths relative to the checkout, so a fresh clone elsewhere (CI) reuses the cache.
export CCACHE_BASEDIR := $(CURDIR)
# Debug builds (-g) would otherwise hash the build directory into every key.
export CCACHE_NOHASHDIR := 1

.PHONY: all deps configure build demo test asan bench fuzz soak format check-install clean

all: build

deps:
	scripts/install-deps.sh

configure: deps
	cmake --preset release

build: configure
	cmake --build --preset release -j$(JOBS)

demo: build
	$(DEMO_BIN) $(DEMO_ARGS)

test: build
	ctest --preset release

asan: deps
	cmake --preset asan
	cmake --build --preset asan -j$(JOBS)
	ctest --preset asan

bench: build
	scripts/run-benchmarks.sh

fuzz: deps
	cmake --preset fuzz
	cmake --build --preset fuzz -j$(JOBS)
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/run-fuzzers.sh

# kill -9, SIGSTOP and restarts under load for SOAK_MINUTES; exits non-zero on any duplicate or
# uncounted payload (docs/topologies.md, "Soaking a topology"). The CI form is tools_soak_test.
soak: build
	build/release/tools/postal soak $(SOAK_FILE) --minutes $(SOAK_MINUTES) --seed $(SOAK_SEED)

# Only the folders that exist: a bare `find` would default to `.` and walk build/.
format:
	$(if $(wildcard $(FORMAT_DIRS)),find $(wildcard $(FORMAT_DIRS)) -type f \( -name '*.h' -o -name '*.cc' \) -print0 \
	  | xargs -0 -r clang-format -i,@echo "format: no source folders yet")

check-install: build
	scripts/check-install.sh

clean:
	rm -rf build
