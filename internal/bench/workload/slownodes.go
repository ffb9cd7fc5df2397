package workload

import (
	"fmt"
	"strconv"
	"strings"
)

// SlowNodeWarning returns one line when workload w's slow nodes do not
// act as its file says in a run of ranks ranks, "" otherwise: a real run
// (real) does not emulate slow nodes, and a simulated slow node beyond
// the world's last node (ranks over Cluster.RanksPerNode, rounded up)
// slows no rank. When none of the slow nodes is in the world, the
// workload runs as a uniform cluster; the line says how many ranks would
// include the first of them. A slow node outside the world is warned
// of when cpu_slowdown is 1 too (no node is slow then, in the world or
// not), as it is when the slowdown is real: the file lists a node the
// run does not have.
func SlowNodeWarning(w *Workload, ranks int, real bool) string {
	c := w.Cluster
	if len(c.SlowNodes) == 0 || c.RanksPerNode < 1 || ranks < 1 || real && c.CPUSlowdown == 1 {
		return ""
	}
	if real {
		return fmt.Sprintf("workload %s: slow nodes are not emulated in real runs: every rank runs at this machine's speed", w.Name)
	}
	nodes := (ranks + c.RanksPerNode - 1) / c.RanksPerNode
	var outside []string
	first, in := -1, 0
	for _, n := range c.SlowNodes {
		if n < nodes {
			in++
			continue
		}
		outside = append(outside, strconv.Itoa(n))
		if first < 0 || n < first {
			first = n
		}
	}
	if len(outside) == 0 {
		return ""
	}
	what := "slow node " + outside[0] + " lies"
	if len(outside) > 1 {
		what = "slow nodes " + strings.Join(outside, ", ") + " lie"
	}
	world := fmt.Sprintf("%d ranks, %d per node: node 0", ranks, c.RanksPerNode)
	if nodes > 1 {
		world = fmt.Sprintf("%d ranks, %d per node: nodes 0-%d", ranks, c.RanksPerNode, nodes-1)
	}
	if c.CPUSlowdown == 1 {
		return fmt.Sprintf("workload %s: %s outside the simulated world (%s); with cpu_slowdown 1 no node is slow anyway", w.Name, what, world)
	}
	if in > 0 {
		return fmt.Sprintf("workload %s: %s outside the simulated world (%s) and slow no rank", w.Name, what, world)
	}
	return fmt.Sprintf("workload %s: %s outside the simulated world (%s): no rank is slow, so it runs as a uniform cluster (--ranks %d or more includes node %d)",
		w.Name, what, world, first*c.RanksPerNode+1, first)
}
