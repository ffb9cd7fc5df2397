#!/usr/bin/env bash
# multinode.sh — run an MPI job across K "nodes" on this machine: each node is a
# network namespace with its own hostname and address on one bridge, reached by
# OpenMPI through an rsh agent that enters it, as ssh would enter a real node.
#
#   scripts/multinode.sh [--nodes K] [--slots R] [--rate RATE] -- -np N datahelix info
#   scripts/multinode.sh --nodes 2 --rate 20mbit -- -np 4 datahelix run --quiet
#
# Every argument after -- goes to mpirun as with ./mpirun.sh: the first word
# datahelix is replaced by .bin/datahelix (built when missing or stale). Options:
#   --nodes K     nodes (default 2)
#   --slots R     ranks each node takes (default 2): --host ADDR:R,...
#   --rate RATE   limit each node's link with tc tbf (20mbit, 1gbit; default none);
#                 this kernel has no netem, so links add no delay beyond the bridge's
#   --keep        leave the nodes up after the job (for debugging; torn down otherwise)
# DATAHELIX_MPI=mpich uses MPICH's Hydra (mpiexec.mpich -launcher ssh -launcher-exec
# AGENT) and the MPICH build, as mpirun.sh does.
# mpirun and its daemons probe each other's TCP links every 5 s after 10 s idle
# (oob_tcp_keepalive_*; OpenMPI's defaults take 8 minutes), so that they notice a
# lost node as datahelix's ranks do (--peer-timeout). The nodes are torn down when the job ends, fails or is interrupted (their
# processes killed, the namespaces and the bridge deleted). Needs root and
# network namespaces; prints one line and exits 3 where they are not permitted.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
nodes=2 slots=2 rate="" keep=""
while [ $# -gt 0 ]; do
	case "$1" in
	--nodes) nodes=$2; shift 2 ;;
	--slots) slots=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--) shift; break ;;
	-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
	*) echo "multinode.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || { echo "multinode.sh: no mpirun arguments after -- (see --help)" >&2; exit 2; }

id=$$ # names unique to this run: several may run at once
net=$((id % 200 + 20))
subnet="10.$net.0"
br="dhbr$id"
tmp=$(mktemp -d)

if [ "$(id -u)" -ne 0 ] || ! ip netns add "dhprobe$id" 2>/dev/null; then
	echo "multinode.sh: network namespaces are not permitted here (needs root and CAP_SYS_ADMIN)" >&2
	exit 3
fi
ip netns del "dhprobe$id"

teardown() {
	set +e
	sleep 1 # what the job's end signalled has a moment to exit
	for n in $(seq 0 $((nodes - 1))); do
		ns="dh${id}n$n"
		pids=$(ip netns pids "$ns" 2>/dev/null)
		if [ -n "$pids" ]; then
			echo "multinode.sh: left running on node$n after the job: $(ps -o comm= -p "$(echo $pids | tr ' ' ,)" | sort | uniq -c | xargs)" >&2
			kill -9 $pids 2>/dev/null
		fi
		ip netns del "$ns" 2>/dev/null
		# A rank killed on the node (a lost node, a cut link) leaves its
		# OpenMPI shared-memory segments: /dev/shm is the host's. Remove
		# the node's that no live process maps (another bed's job may use
		# the same node name).
		for f in /dev/shm/vader_segment.node$n.*; do
			[ -e "$f" ] || continue
			grep -qsF "$f" /proc/[0-9]*/maps || rm -f "$f"
		done
	done
	ip link del "$br" 2>/dev/null
	rm -rf "$tmp"
}
[ -n "$keep" ] || trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ip link add "$br" type bridge
ip addr add "$subnet.254/24" dev "$br"
ip link set "$br" up
hosts=()
{
	echo '#!/bin/sh'
	echo '# rsh agent: enter the node named by its address, as ssh would'
	echo 'while [ "${1#-}" != "$1" ]; do shift; done # ssh options (Hydra passes -x)'
	echo 'host=$1; shift'
	echo 'case "$host" in'
} >"$tmp/agent"
for n in $(seq 0 $((nodes - 1))); do
	ns="dh${id}n$n" addr="$subnet.$((n + 1))"
	ip netns add "$ns"
	ip link add "dh${id}v$n" type veth peer name eth0 netns "$ns"
	ip link set "dh${id}v$n" master "$br" up
	ip netns exec "$ns" ip addr add "$addr/24" dev eth0
	ip netns exec "$ns" ip link set eth0 up
	ip netns exec "$ns" ip link set lo up
	if [ -n "$rate" ]; then # both directions of the node's link
		tc qdisc add dev "dh${id}v$n" root tbf rate "$rate" burst 32kbit latency 400ms
		ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 32kbit latency 400ms
	fi
	echo "$addr) ns=$ns name=node$n ;;" >>"$tmp/agent"
	hosts+=("$addr:$slots")
done
cat >>"$tmp/agent" <<'EOF'
*) echo "multinode agent: unknown host $host" >&2; exit 1 ;;
esac
exec ip netns exec "$ns" unshare -u sh -c 'hostname "$0"; exec sh -c "$1"' "$name" "$*"
EOF
chmod +x "$tmp/agent"

# shellcheck source=scripts/deps.sh
source "$here/scripts/deps.sh"
datahelix_install_deps
flavor=${DATAHELIX_MPI:-openmpi}
case "$flavor" in
openmpi) bin="$here/.bin/datahelix" tags="" ;;
mpich) bin="$here/.bin/datahelix-mpich" tags="-tags=mpich" ;;
*) echo "multinode.sh: DATAHELIX_MPI=$flavor: want openmpi or mpich" >&2; exit 2 ;;
esac
mkdir -p "$here/.bin"
(cd "$here" && go build $tags -o "$bin" ./cmd/datahelix)
args=() replaced=""
for a in "$@"; do # the first word datahelix is the binary; later ones are arguments
	if [ -z "$replaced" ] && [ "$a" = datahelix ]; then
		a=$bin replaced=1
	fi
	args+=("$a")
done
hostlist=$(IFS=,; echo "${hosts[*]}")
set +e
if [ "$flavor" = mpich ]; then
	mpiexec.mpich -hosts "$hostlist" -launcher ssh -launcher-exec "$tmp/agent" -localhost "$subnet.254" "${args[@]}"
	exit $?
fi
root=()
[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
mpirun.openmpi "${root[@]}" --host "$hostlist" \
	--mca plm_rsh_agent "$tmp/agent" \
	--mca oob_tcp_if_include "$subnet.0/24" --mca btl_tcp_if_include "$subnet.0/24" \
	--mca btl tcp,self,vader --mca btl_vader_single_copy_mechanism none \
	--mca oob_tcp_keepalive_time 10 --mca oob_tcp_keepalive_intvl 5 --mca oob_tcp_keepalive_probes 3 \
	"${args[@]}"
status=$?
exit $status
