# agentplane — `make help` lists the targets.
.PHONY: help build test race vet fuzz bench cost peers deploy-test ci run serve mcp-conformance release image

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

run: ## terminal chat on the embedded demo configuration
	go run ./cmd/agentplane chat

serve: ## the HTTP API, event streams and MCP server on 127.0.0.1:8080
	go run ./cmd/agentplane serve

build: ## ./agentplane, stamped with its version, commit and time as a release is (scripts/ldflags.sh)
	go build -ldflags "$$(bash scripts/ldflags.sh)" -o agentplane ./cmd/agentplane

test: ## the tests (PostgreSQL's and the browser's run where AGENTPLANE_TEST_POSTGRES is set and chromium is on PATH), then the suites skipped here
	@status=0; go test ./... || status=$$?; go run ./internal/testkit/testenv/skipped; exit $$status

race: ## all tests with the race detector, shuffled
	go test -race -shuffle=on ./...

vet: ## gofmt and go vet
	@test -z "$$(gofmt -l .)" || (gofmt -l .; exit 1)
	go vet ./...

fuzz: ## fuzz every parser and decoder for 30s each
	go test -run='^$$' -fuzz='^FuzzNormalize$$' -fuzztime=30s ./resolve
	go test -run='^$$' -fuzz='^FuzzDecodeItems$$' -fuzztime=30s ./resolve
	go test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=30s ./trigger
	go test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=30s ./config
	go test -run='^$$' -fuzz='^FuzzRoute$$' -fuzztime=30s ./router
	go test -run='^$$' -fuzz='^FuzzClassify$$' -fuzztime=30s ./exemplar
	go test -run='^$$' -fuzz='^FuzzRouteLine$$' -fuzztime=30s ./cmd/agentplane
	go test -run='^$$' -fuzz='^FuzzVerifyJSONL$$' -fuzztime=30s ./audit
	go test -run='^$$' -fuzz='^FuzzAppend$$' -fuzztime=30s ./internal/canonjson
	go test -run='^$$' -fuzz='^FuzzRequests$$' -fuzztime=30s ./httpapi
	go test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=30s ./workflow

bench: ## the README's benchmarks: routing, indexing, examples, the gate, durable stores
	go test -run='^$$' -bench='BenchmarkRoute' -cpu 1 -count 3 ./router
	go test -run='^$$' -bench='BenchmarkTrain|BenchmarkClassify' -cpu 1 -count 3 ./exemplar
	go run ./bench/clinc150
	go test -run='^$$' -bench='BenchmarkNewIndex|BenchmarkLoadJSON' -cpu 1 -benchtime 1x ./resolve
	go test -run='^$$' -bench='BenchmarkRouteCommand' -cpu 1 -count 3 ./cmd/agentplane
	go test -run='^$$' -bench='BenchmarkExecute' -cpu 1 -count 3 ./gate
	go test -run='^$$' -bench='BenchmarkAppend' -cpu 1 -count 3 ./internal/canonjson
	go test -run='^$$' -bench='BenchmarkDurable/interleaved' -benchtime 20x ./store/sqlite ./store/postgres

cost: ## the durable paths priced in instructions (valgrind's callgrind; apt-get install valgrind) and SQL statements, SQLite and PostgreSQL (AGENTPLANE_TEST_POSTGRES; it migrates that database's public schema: give it a database of its own, e.g. createdb cost): the table in docs/performance.md (minutes; not in CI)
	go run ./bench/cost

peers: ## peers side by side: CLINC150 vs scikit-learn and fastText (apt-get install python3-sklearn fasttext; ~40 min), notifications vs River, workflows vs LangGraph JS and Temporal (not in CI)
	/usr/bin/python3 bench/peers/clinc150/peers.py
	cd bench/peers/river && go run . -n 10000 -producers 32
	bash bench/peers/workflows.sh

deploy-test: ## three serve processes on PostgreSQL behind deploy/'s HAProxy and nginx, 120 SIGKILLs under load (apt-get install haproxy nginx; AGENTPLANE_TEST_POSTGRES; not in CI, which runs 12)
	AGENTPLANE_DEPLOY_KILLS=120 AGENTPLANE_DEPLOY_BENCH=1 AGENTPLANE_REQUIRE_BALANCER=1 PATH="$$PATH:/usr/sbin" go test ./cmd/agentplane/deploytest -run '^TestDeployment' -count 1 -v -timeout 30m

mcp-conformance: ## the official MCP conformance suite and Inspector against serve and the fixture server (MCP_SCRIPTS=DIR holding conformance.sh; not in CI)
	bash scripts/mcp-conformance.sh

release: ## a reproducible release build for linux/darwin × amd64/arm64 with checksums, in dist/
	bash scripts/release.sh

image: ## the container image (FROM scratch) with buildah, smoke-tested, as dist/agentplane-image.tar (apt-get install buildah)
	bash scripts/image.sh

ci: ## what CI runs
	bash .ci/run
