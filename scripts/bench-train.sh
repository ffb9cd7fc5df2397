#!/usr/bin/env bash
# bench-train.sh — a real PyTorch trainer (examples/train.py, DDP on gloo) fed by
# datahelix and by the stock DataLoader, at several rank counts, side by side.
#
#   scripts/bench-train.sh                          # default dataset, 2 and 4 ranks
#   scripts/bench-train.sh --steps 60 --batch 4 --workers 2 --out bench-out/train
#   scripts/bench-train.sh --uniform ~/shards/imagenet    # also an images-only dataset
#
# For each dataset and rank count N it runs
#   datahelix: ./mpirun.sh -np N datahelix train --quiet --json OUT/NAME-N-datahelix.server.json ...
#                  -- /usr/bin/python3 examples/train.py --loader datahelix --json OUT/NAME-N-datahelix.json
#   torch:     /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node N
#                  examples/train.py --loader torch --workers W --json OUT/NAME-N-torch.json
# (through examples/torchrun.py where torch < 2.0 on Python 3.11 breaks the stock
# launcher), then prints a table per rank count: input wait per rank (seconds and
# fraction of the wall time), throughput over the whole run and after --warmup
# steps, the loss, and the ratios datahelix/torch. Each run's log is OUT/NAME-N-LOADER.log;
# a failed run is reported in the table and the others still run.
#
# Options (defaults in brackets):
#   --steps N [60]  --batch B [4]  --workers W [2]  --ranks "2 4"  --warmup H [8]
#   --frames F [8]  --size S [224]  --threads T [1]: trainer threads per rank, both loaders
#   --width W [512]: the model's width   --uniform DIR: also run on these shards
#   --only torch|datahelix: one loader   --out DIR [bench-out/train]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
PY=/usr/bin/python3

steps=60 batch=4 workers=2 ranks="2 4" warmup=8 frames=8 size=224 threads=1 width=512
uniform="" only="" out=bench-out/train

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

parse_args() {
	while [ $# -gt 0 ]; do
		case "$1" in
		--steps) steps=$2; shift ;;
		--batch) batch=$2; shift ;;
		--workers) workers=$2; shift ;;
		--ranks) ranks=$2; shift ;;
		--warmup) warmup=$2; shift ;;
		--frames) frames=$2; shift ;;
		--size) size=$2; shift ;;
		--threads) threads=$2; shift ;;
		--width) width=$2; shift ;;
		--uniform) uniform=$2; shift ;;
		--only) only=$2; shift ;;
		--out) out=$2; shift ;;
		-h | --help) usage; exit 0 ;;
		*) echo "bench-train.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
		esac
		shift
	done
	case "$only" in "" | torch | datahelix) ;; *) echo "bench-train.sh: --only torch or datahelix" >&2; exit 2 ;; esac
}

# torchrun: the stock launcher, or the shim when this torch's launcher is broken.
torchrun() {
	if $PY -c 'from torch.distributed.elastic.multiprocessing.api import Std; assert Std.from_str("0") is not None' 2>/dev/null; then
		$PY -m torch.distributed.run "$@"
	else
		$PY examples/torchrun.py "$@"
	fi
}

# run_one NAME DATA N LOADER: one training run; its JSON and log go under $out.
run_one() {
	local name=$1 data=$2 n=$3 loader=$4
	local base="$out/$name-$n-$loader" data_flag=() t0 rc=0
	[ -n "$data" ] && data_flag=(--data "$data")
	local common=(--steps "$steps" --batch "$batch" --warmup "$warmup" --threads "$threads" --width "$width" --log-every 0)
	rm -f "$base.json"
	t0=$(date +%s)
	echo "== $name, $n ranks, $loader"
	if [ "$loader" = datahelix ]; then
		./mpirun.sh -np "$n" datahelix train --quiet --json "$base.server.json" "${data_flag[@]}" \
			--steps "$steps" --batch "$batch" --workers "$workers" --frames "$frames" --size "$size" \
			-- "$PY" examples/train.py --loader datahelix "${common[@]}" --json "$base.json" \
			>"$base.log" 2>&1 || rc=$?
	else
		torchrun --standalone --nproc_per_node "$n" examples/train.py --loader torch "${data_flag[@]}" \
			--workers "$workers" --frames "$frames" --size "$size" "${common[@]}" --json "$base.json" \
			>"$base.log" 2>&1 || rc=$?
	fi
	if [ $rc -ne 0 ] || [ ! -s "$base.json" ]; then
		echo "   failed (exit $rc) after $(($(date +%s) - t0)) s; from $base.log:"
		{ grep -m 4 -E '^datahelix|Error|error' "$base.log" || tail -n 5 "$base.log"; } | sed 's/^/   | /'
	else
		grep '^summary' "$base.log" | sed 's/^/   /' || true
	fi
}

# table: one block per dataset and rank count from the JSONs under $out.
table() {
	$PY - "$out" "$warmup" "$@" <<'EOF'
import json, os, sys
out, warmup, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "n/a"
for run in runs:
    name, n = run.split(":")
    print(f"\n{name}, {n} ranks")
    print(f"  {'loader':<10} {'wait/rank s':>11} {'wait %':>7} {'max wait s':>10} {'samples/s':>9} "
          f"{'steady/s':>8} {'step p50 ms':>11} {'loss':>14}")
    got = {}
    for loader in ("torch", "datahelix"):
        d = got[loader] = load(os.path.join(out, f"{name}-{n}-{loader}.json"))
        if d is None:
            print(f"  {loader:<10} {'(not run or failed: see ' + name + '-' + n + '-' + loader + '.log)'}")
            continue
        mx = max(r["wait_s"] for r in d["per_rank"])
        steady = d["steady_throughput_sps"]
        loss = f"{d['loss_first']:.3f}->{d['loss_last_avg5']:.3f}"
        print(f"  {loader:<10} {d['wait_s']:>11.2f} {100 * d['wait_frac']:>6.1f}% {mx:>10.2f} "
              f"{d['throughput_sps']:>9.1f} {steady if steady is None else round(steady, 1)!s:>8} "
              f"{d['step_ms_p50']:>11.1f} {loss:>14}")
        print("  " + " " * 10 + " per rank: " + ", ".join(
            f"r{r['rank']} {r['wait_s']:.2f} s ({100 * r['wait_frac']:.0f}%)" for r in d["per_rank"]))
    t, h = got["torch"], got["datahelix"]
    if t and h:
        print(f"  datahelix/torch: wait {ratio(h['wait_s'], t['wait_s'])}, "
              f"throughput {ratio(h['throughput_sps'], t['throughput_sps'])}, "
              f"steady throughput {ratio(h['steady_throughput_sps'], t['steady_throughput_sps'])}")
print(f"\n(wait: time blocked getting the next batch, mean per rank; wait %: of the job's wall time; "
      f"steady: after {warmup} warm-up steps; loss: first step -> mean of the last 5)")
EOF
}

main() {
	parse_args "$@"
	mkdir -p "$out"
	local sets=("default:") runs=() s name data n loader
	[ -n "$uniform" ] && sets+=("uniform:$uniform")
	for s in "${sets[@]}"; do
		name=${s%%:*} data=${s#*:}
		for n in $ranks; do
			for loader in torch datahelix; do
				[ -n "$only" ] && [ "$only" != "$loader" ] && continue
				run_one "$name" "$data" "$n" "$loader"
			done
			runs+=("$name:$n")
		done
	done
	echo
	echo "steps $steps, batch $batch per rank, $workers workers per rank, frames $frames, size $size, $threads trainer thread(s) per rank"
	table "${runs[@]}"
	echo
	echo "JSONs and logs: $out"
}

main "$@"
