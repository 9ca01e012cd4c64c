# snag: build, test, benchmark, demo. `make help` lists the targets.

GO      ?= go
BIN     ?= bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS := -X github.com/snagdev/snag/internal/version.stamp=$(VERSION)
# The programs are built without cgo: statically linked, snag starts without
# the dynamic loader (about 4 ms of every command). The tests keep cgo, which
# the race detector needs.
BUILD   := CGO_ENABLED=0 $(GO) build

.PHONY: help build test lint race bench bench-short bench-daemon bench-cli bench-peer fuzz demo clean

help:
	@echo "make build    build bin/snag and bin/snagd"
	@echo "make demo     run snag on the sample project in a temporary git repository"
	@echo "make test     lint, then every test with the race detector"
	@echo "make bench    the benchmarks, full size (minutes)"
	@echo "make bench-daemon  snagd's benchmarks alone: edit to API, claims, list and memory at 100k, git checkouts"
	@echo "make bench-cli  snag list and add as whole processes against snagd (hyperfine)"
	@echo "make bench-peer  snag beside Backlog.md 1.52.0 (from npm) on the same tasks: list, show, search, add"
	@echo "make fuzz     fuzz the task file codec for a while"
	@echo "make lint     gofmt check and go vet"

build:
	@echo "building snag and snagd into $(BIN)/ (a first build fetches and compiles the modules: a few minutes)"
	$(BUILD) -ldflags "$(LDFLAGS)" -o $(BIN)/snag ./cmd/snag
	$(BUILD) -ldflags "$(LDFLAGS)" -o $(BIN)/snagd ./cmd/snagd
	$(BUILD) -o $(BIN)/taskgen ./cmd/taskgen

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags failpoints ./internal/failpoint/ ./internal/daemon/

# The crash tests build snagd with -tags failpoints themselves; the
# failpoints' own tests need the tag too. The daemon's and mcp's tests wait
# on processes more than they use the processor: four of a package at once.
# The race detector's pointer checks stay out of the SQLite driver (a C
# library translated to Go: they were half of the index tests' processor
# time, and check the driver, not snag); snagdtest builds snagd the same way.
# The longest packages are named first, so that go test starts them first.
RACE := -race -gcflags='modernc.org/...=-d=checkptr=0'
test: lint
	$(GO) test $(RACE) -count=1 -parallel 4 -timeout 35m ./internal/daemon/ ./internal/mcp/ ./internal/index/ ./...
	$(GO) test $(RACE) -count=1 -tags failpoints ./internal/failpoint/

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 60m $$($(GO) list ./... | grep -v /internal/daemon)
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./internal/daemon/
	scripts/bench-cli $(BIN)

bench-daemon: build
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./internal/daemon/

bench-cli: build
	scripts/bench-cli $(BIN)

# N tasks (1,000) and RUNS paired runs (10); needs npm and node.
PEER_N ?= 1000
PEER_RUNS ?= 10
bench-peer: build
	scripts/bench-peer/run $(BIN) $(PEER_N) $(PEER_RUNS)

bench-short:
	$(GO) test -short -run '^$$' -bench . -benchtime 1x ./...

FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./internal/codec/
	$(GO) test -run '^$$' -fuzz '^FuzzEdit$$' -fuzztime $(FUZZTIME) ./internal/codec/
	$(GO) test -run '^$$' -fuzz '^FuzzFastFrontmatter$$' -fuzztime $(FUZZTIME) ./internal/codec/

demo: build
	@scripts/demo "$(BIN)/snag"

clean:
	rm -rf $(BIN)
