#!/usr/bin/env bash
# Installs the Debian packages datahelix builds and runs with, when missing.
# Sourced by mpirun.sh and test.sh; safe to run again (idempotent).
#
#   scripts/deps.sh          install what is missing (needs root or sudo)
#   scripts/deps.sh --check  only report what is missing
set -euo pipefail

DATAHELIX_PACKAGES=(
	pkg-config
	openmpi-bin libopenmpi-dev      # the MPI the binary is built against by default
	mpich libmpich-dev              # the portability build (-tags mpich)
	ffmpeg libavformat-dev libavcodec-dev libswscale-dev libswresample-dev libavutil-dev
	libturbojpeg0-dev
)

# What the trainer side needs on top (datahelix train's tests and
# examples/train.py): Debian's PyTorch, PyAV and numpy. test.sh installs
# them; the main job (datahelix run) does not need them.
DATAHELIX_TRAIN_PACKAGES=(
	python3-torch python3-torchvision python3-av python3-numpy
)

datahelix_missing_packages() {
	local p missing=()
	for p in "${DATAHELIX_PACKAGES[@]}" "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	echo "${missing[@]:-}"
}

# datahelix_install_deps [EXTRA_PACKAGE...] installs what is missing of
# DATAHELIX_PACKAGES and the extra packages given.
datahelix_install_deps() {
	local missing
	missing=$(datahelix_missing_packages "$@")
	[ -z "$missing" ] && return 0
	local sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
			sudo="sudo"
		else
			echo "datahelix: missing system packages: $missing" >&2
			echo "datahelix: run this once, then try again:" >&2
			echo "  sudo apt-get update && sudo apt-get install -y $missing" >&2
			return 1
		fi
	fi
	echo "datahelix: installing system packages: $missing" >&2
	export DEBIAN_FRONTEND=noninteractive
	# shellcheck disable=SC2086
	if ! $sudo apt-get install -y -q $missing >/dev/null 2>&1; then
		$sudo apt-get update -q >/dev/null
		# shellcheck disable=SC2086
		$sudo apt-get install -y -q $missing >/dev/null
	fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	if [ "${1:-}" = "--check" ]; then
		m=$(datahelix_missing_packages)
		[ -z "$m" ] && { echo "all packages present"; exit 0; }
		echo "missing: $m"; exit 1
	fi
	datahelix_install_deps
fi
