#!/usr/bin/env bash
# Runs every fuzzer of the module, one after another, for a while each.
#
#   scripts/fuzz.sh                 every fuzzer for 30 s
#   FUZZTIME=5m scripts/fuzz.sh     longer
#   scripts/fuzz.sh FuzzParseMP4    only the fuzzers whose names match
#
# -fuzzminimizetime is 1 s: with Go's default of 60 s, a fuzzer seeded with
# media files spends its whole run minimizing new inputs (FuzzParseWebM
# made 476 executions in 30 s that way, 275,597 with 1 s). The TurboJPEG
# fuzzer runs again under -tags noturbojpeg for the image/jpeg fallback.
# Crashers are written under each package's testdata/fuzz; fix the bug,
# then commit them as regression seeds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh
datahelix_install_deps

fuzztime=${FUZZTIME:-30s}
match=${1:-.}
failed=()
ran=0

fuzz() { # pkg name [tags]
	local pkg=$1 name=$2 tags=${3:-}
	printf '\n== %s %s%s (%s)\n' "$pkg" "$name" "${tags:+ -tags $tags}" "$fuzztime"
	ran=$((ran + 1))
	if ! go test ${tags:+-tags "$tags"} -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s "$pkg" 2>&1 | tail -n 4; then
		failed+=("$pkg $name${tags:+ (-tags $tags)}")
	fi
}

for pkg in $(go list ./...); do
	# A package whose tests do not build is a failure, not a package
	# without fuzzers.
	if ! list=$(go test -list '^Fuzz' "$pkg" 2>&1); then
		printf '%s\n' "$list"
		failed+=("$pkg (tests do not build)")
		continue
	fi
	for name in $(printf '%s\n' "$list" | grep '^Fuzz' | grep -E -- "$match" || true); do
		fuzz "$pkg" "$name"
		if [ "$pkg" = github.com/datahelix/datahelix/decode/tjpeg ]; then
			fuzz "$pkg" "$name" noturbojpeg
		fi
	done
done

printf '\n%d fuzz runs, %d failed\n' "$ran" "${#failed[@]}"
for f in "${failed[@]}"; do echo "FAILED: $f"; done
[ "$ran" -gt 0 ] || { echo "no fuzzer matches $match" >&2; exit 2; }
[ "${#failed[@]}" -eq 0 ]
