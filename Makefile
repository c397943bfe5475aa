# One command for a newcomer: `make demo` or `make test` installs what is missing, builds
# (Release, in build/) and runs. Executables land in build/bin/.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# `make install`: PREFIX/bin/sailor, PREFIX/bin/sailor-node, PREFIX/share/sailor (configs/),
# staged under DESTDIR when it is given (docs/deploy.md).
PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: all deps configure build demo test bench install clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	@bash scripts/install-deps.sh
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: $(BUILD_DIR)/CMakeCache.txt

# `make` and `make demo` build the programs only (sailor, sailor-node); `make test` builds the
# programs, the tests and the examples; `make bench` builds the benches and runs them (their
# 16 programs were 300 s of the 1,846 s of compiler time a cold `make test` spent with them).
build: deps configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target programs

demo: build
	bash scripts/demo.sh $(BUILD_DIR)

test: deps configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target all
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600

bench: deps configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target programs benches
	bash scripts/bench.sh $(BUILD_DIR)

install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD_DIR) --prefix "$(PREFIX)"

clean:
	rm -rf $(BUILD_DIR)
