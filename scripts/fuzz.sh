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

retried=()

fuzz() { # pkg name [tags]
	local pkg=$1 name=$2 tags=${3:-} out attempt
	printf '\n== %s %s%s (%s)\n' "$pkg" "$name" "${tags:+ -tags $tags}" "$fuzztime"
	ran=$((ran + 1))
	for attempt in 1 2; do
		if out=$(go test ${tags:+-tags "$tags"} -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s "$pkg" 2>&1); then
			printf '%s\n' "$out" | tail -n 4
			return
		fi
		printf '%s\n' "$out" | tail -n 4
		# Go's fuzzing coordinator can fail a target at the -fuzztime
		# deadline with "context deadline exceeded" and no failing input
		# (a race in its shutdown, likelier on a loaded machine): that
		# run found nothing, so it runs once more. A failure that wrote
		# an input, or a second one, counts.
		if [ "$attempt" = 1 ] && grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
			echo "(no failing input written: Go's fuzztime deadline race; running once more)"
			retried+=("$pkg $name${tags:+ (-tags $tags)}")
			continue
		fi
		break
	done
	failed+=("$pkg $name${tags:+ (-tags $tags)}")
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
		if [ "$pkg" = github.com/datahelix/datahelix/internal/tjpeg ]; then
			fuzz "$pkg" "$name" noturbojpeg
		fi
	done
done

printf '\n%d fuzz runs, %d failed, %d run again after a deadline race\n' "$ran" "${#failed[@]}" "${#retried[@]}"
for f in "${retried[@]}"; do echo "RAN AGAIN: $f"; done
for f in "${failed[@]}"; do echo "FAILED: $f"; done
[ "$ran" -gt 0 ] || { echo "no fuzzer matches $match" >&2; exit 2; }
[ "${#failed[@]}" -eq 0 ]
