# SPDX-License-Identifier: Apache-2.0
# The front door. `make demo` and `make test` install what is missing, build and run; `make build`
# only builds. The binary is always build/gpuplane.

BUILD ?= build
CMAKE_ARGS ?=

.PHONY: all build deps demo test format format-check clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_ARGS)

build: $(BUILD)/build.ninja
	cmake --build $(BUILD)

demo: deps build
	@scripts/demo.sh $(BUILD)/gpuplane

test: deps
	@scripts/test.sh

format:
	@scripts/format.sh fix

format-check:
	@scripts/format.sh check

clean:
	rm -rf $(BUILD) build-*
