# The two commands a newcomer needs: `make example` and `make test`.
GO ?= go
BIN := bin

.PHONY: build example test test-arm64 bench bench-arm64 clean

# Without cgo: probe needs nothing of libc's, and a static binary starts
# ~0.8 ms sooner, every run (no dynamic linking, no libc start-up, whose
# cpuid probing traps to the hypervisor in a VM).
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/probe ./cmd/probe

# Build probe and the bundled example, then trace every call of work().
example: build
	gcc -O2 -g -pthread -o $(BIN)/counter examples/counter.c
	$(BIN)/probe run 'p:work i' 'r:work $$retval' 'p:libc:printf fmt=+0($$arg1):string' -- $(BIN)/counter 2 2

# Unit tests, race detector on, then end-to-end tests on real tracees.
# integration/otlp (probe against the OpenTelemetry collector's receiver)
# runs without -race: it shares no state between goroutines of ours, and
# the collector under the race detector would take minutes to build.
# The end-to-end tests take ~7 minutes on 2 CPUs: -timeout leaves room
# for a loaded machine (go test's own is 10 minutes).
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m $$($(GO) list ./... | grep -v /integration/otlp)
	$(GO) test -count=1 ./integration/otlp

# The end-to-end tests against arm64 tracees, in an arm64 Linux guest under
# qemu-system-aarch64 (guest/arm64/test; it installs what it needs).
test-arm64:
	guest/arm64/test

# The per-hit benchmarks against the floor, in the arm64 guest (TCG: not
# real hardware's timings).
bench-arm64:
	guest/arm64/test -bench

clean:
	rm -rf $(BIN)

# Per-hit cost against the ptrace floor, measured in the same run
# (bench/run.sh [HITS [RUNS]]), then the pipeline against uftrace
# (bench/pipeline.sh [CALLS [RUNS]]; see docs/speed.md).
bench:
	bench/run.sh
	bench/pipeline.sh
	bench/calls.sh
	bench/lua.sh
	bench/sdt.sh
