#!/usr/bin/env bash
# mpirun.sh — launch datahelix under MPI on this machine.
#
#   ./mpirun.sh -np 4 datahelix info
#   ./mpirun.sh -np 2 datahelix info --pin      # each rank pinned; shows its CPUs
#   ./mpirun.sh -np 4 datahelix run --loader torch,helix
#   DATAHELIX_MPI=mpich ./mpirun.sh -np 4 datahelix info    # MPICH build
#
# It installs missing system packages (or prints the command to), builds
# .bin/datahelix when it is missing or stale (go build decides), and calls
# mpirun with what a single node or a container needs:
#   --allow-run-as-root                 when run as root (OpenMPI refuses otherwise)
#   --oversubscribe                     when -np exceeds this machine's cores
#   --mca btl_vader_single_copy_mechanism none
#                                       shared memory without CMA, which needs
#                                       ptrace and fails in most containers
# Every other argument goes to mpirun unchanged; the word "datahelix" is
# replaced by the built binary. Set MPIRUN to use another mpirun (e.g. a
# cluster's module), DATAHELIX_MPI=mpich for MPICH's mpiexec and build.
#
# Under Slurm do not use this script: srun starts the ranks itself, e.g.
#   srun --mpi=pmix -n 8 .bin/datahelix run --data /scratch/shards
# (see the README for an sbatch script). Without --mpi=pmix each task would
# be a one-rank MPI job; datahelix notices and stops with a message.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

case "${1:-}" in
-h | --help | "")
	usage
	[ -n "${1:-}" ] && exit 0 || exit 2
	;;
esac

# shellcheck source=scripts/deps.sh
source "$here/scripts/deps.sh"
datahelix_install_deps

flavor=${DATAHELIX_MPI:-openmpi}
case "$flavor" in
openmpi) bin="$here/.bin/datahelix"; tags="" ; launcher=${MPIRUN:-mpirun.openmpi} ;;
mpich) bin="$here/.bin/datahelix-mpich"; tags="-tags=mpich"; launcher=${MPIRUN:-mpiexec.mpich} ;;
*) echo "mpirun.sh: DATAHELIX_MPI=$flavor: want openmpi or mpich" >&2; exit 2 ;;
esac
command -v "$launcher" >/dev/null || launcher=mpirun

if ! command -v go >/dev/null; then
	echo "mpirun.sh: go not found on PATH (install Go 1.26 from https://go.dev/dl)" >&2
	exit 1
fi
mkdir -p "$here/.bin"
# Stamp the commit into the binary (the report records it; builds here run
# with -buildvcs=false), marked dirty when tracked files have uncommitted
# changes; empty without git.
commit=$(git -C "$here" rev-parse HEAD 2>/dev/null || true)
if [ -n "$commit" ] && [ -n "$(git -C "$here" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	commit="$commit-dirty"
fi
(cd "$here" && go build $tags -ldflags "-X github.com/datahelix/datahelix/internal/machine.buildCommit=$commit" -o "$bin" ./cmd/datahelix)
# The benchmark harness (datahelix bench), beside it: datahelix runs it.
(cd "$here" && go build $tags -ldflags "-X github.com/datahelix/datahelix/internal/machine.buildCommit=$commit" -o "$here/.bin/datahelix-bench" ./cmd/datahelix-bench)

# Find the rank count and replace "datahelix" with the binary.
np=1
args=()
seen_prog=0
prev=""
for a in "$@"; do
	if [ $seen_prog -eq 0 ]; then
		case "$prev" in -np | -n | --np | -c) np=$a ;; esac
		case "$a" in -np=* | --np=* | -n=*) np=${a#*=} ;; esac
		if [ "$a" = datahelix ]; then
			a=$bin
			seen_prog=1
		fi
	fi
	args+=("$a")
	prev=$a
done
if [ $seen_prog -eq 0 ]; then
	echo "mpirun.sh: no 'datahelix' program in the arguments (e.g. ./mpirun.sh -np 4 datahelix info)" >&2
	exit 2
fi

extra=()
if [ "$flavor" = openmpi ]; then
	[ "$(id -u)" -eq 0 ] && extra+=(--allow-run-as-root)
	cores=$(nproc)
	if [[ "$np" =~ ^[0-9]+$ ]] && [ "$np" -gt "$cores" ]; then
		extra+=(--oversubscribe)
	fi
	extra+=(--mca btl_vader_single_copy_mechanism none)
fi
exec "$launcher" "${extra[@]}" "${args[@]}"
