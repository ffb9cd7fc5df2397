#!/usr/bin/env bash
# gpu-bundle.sh — pack what scripts/gpu-check.sh needs on a GPU machine that has
# PyTorch with CUDA but no FFmpeg, libjpeg-turbo or Go: a datahelix binary built
# without MPI (the check runs one rank, an in-process world) and the shared
# libraries it loads, compressed, into .gpu/ (git-ignored through
# .git/info/exclude). Carry .gpu with the working tree, then run gpu-check.sh there.
#
#   scripts/gpu-bundle.sh          # writes .gpu/datahelix.xz and .gpu/lib.tar.xz
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
rm -rf .gpu && mkdir -p .gpu/lib
go build -tags nompi -o .gpu/datahelix ./cmd/datahelix
# Every library the binary loads, but the C runtime's, which the GPU machine has.
ldd .gpu/datahelix | awk '$3 ~ /^\// {print $3}' |
	grep -vE '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
	xargs cp -L -t .gpu/lib
tar -C .gpu -cJf .gpu/lib.tar.xz lib && rm -rf .gpu/lib
xz -9 .gpu/datahelix
du -ch .gpu/* | sed 's/^/gpu-bundle: /'
