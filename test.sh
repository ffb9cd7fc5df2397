#!/usr/bin/env bash
# test.sh — the whole test suite, as CI runs it (.ci/run calls this).
#
# Installs missing system packages (or prints the command to), then:
# gofmt, go vet (OpenMPI, MPICH and no-MPI builds), staticcheck, go test ./...
# (the trainer bridge with real Python trainers), the Python client's tests,
# (with real mpirun jobs), the race detector on the packages without
# media cgo, the MPI conformance suite against MPICH, and the job's MPI
# paths (start-up checks, exchange, failures, stalls, signals) under MPICH.
#
#   ./test.sh            everything
#   ./test.sh -short     skip the slow tests (a quick local check)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=scripts/deps.sh
source scripts/deps.sh
datahelix_install_deps "${DATAHELIX_TRAIN_PACKAGES[@]}"

short=()
[ "${1:-}" = "-short" ] && short=(-short)

step() { printf '\n== %s\n' "$*"; }

step "gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi

step "go vet (OpenMPI, MPICH, no-MPI builds)"
go vet ./...
go vet -tags mpich ./collective/... ./internal/communicator/... ./launcher/... ./cmd/...
go vet -tags nompi ./...

step "staticcheck (unused code, deprecated calls, dropped values)"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

step "the public API's size (exported identifiers of importable packages)"
go test -count=1 -run TestPublicAPISize -v ./cmd/datahelix | grep -E 'exported identifiers|FAIL'

step "go test ./..."
go test "${short[@]}" -timeout 30m ./...

step "Python client (unittest, Debian's python3)"
/usr/bin/python3 -m unittest discover -s python/tests

step "go test -race (pure-Go packages)"
go test "${short[@]}" -race -timeout 30m $(go list ./... | grep -E '/(plan|gpu|collective|spmd|internal/(bridge|step|sim|reader|wire|stall|agree|metrics|loader|communicator))$')

step "MPI conformance against MPICH, and the job's MPI paths under MPICH's mpiexec"
go test "${short[@]}" -tags mpich -count=1 -run 'MPI' ./internal/communicator/
go test "${short[@]}" -tags mpich -count=1 \
	-run 'UnderMPIRun|RanksThatDisagree|KilledRank|StalledRank|BusyRank|SignalEndsJob' ./launcher/

step "ok"
